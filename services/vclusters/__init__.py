"""The vclusters service: the virtual-cluster aggregate (requests and destroys), and queries scoped to one cluster."""
