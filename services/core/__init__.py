"""The pure scheduling core: labels, selectors, the folded view, placement rules and the decision pipeline.

It does no I/O, and uses no clock, asyncio, logging or unseeded randomness: time and seeds are passed in.
"""

from schemas.decisions import Pending, Placed
from services.core.cluster import Cluster
from services.core.errors import LabelError, RejectedError, UnfoldableEventError
from services.core.labels import parse_labels, parse_labels_document, validate_labels
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, replay

__all__ = [
    "Cluster",
    "ClusterView",
    "LabelError",
    "LabelSelector",
    "Pending",
    "Placed",
    "RejectedError",
    "UnfoldableEventError",
    "parse_labels",
    "parse_labels_document",
    "replay",
    "validate_labels",
]
