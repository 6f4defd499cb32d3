"""Imported last by the fork server of `preloaded`: what every forked service would otherwise build or walk again.

The log's event decoder is built here once (msgspec builds a union's decoder on first use), and the heap the
imports left is frozen, so a forked service's first full collection walks only what it built itself.
"""

from __future__ import annotations

import gc

from schemas import AnyEvent
from services.runtime.codec import prepare_decoder

prepare_decoder(AnyEvent)
gc.collect()
gc.freeze()
