"""Virtual clusters: spec, admission, borrowing, info, and the `VirtualClusters` object `Cluster` composes."""
