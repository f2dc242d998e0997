"""Tensorclasses used by the memmap interop corpus (memmap_corpus.py).

They live in their own module so that their ``_type`` in meta.json is
``<class 'corpus_classes.Name'>`` whichever script imports them: a tensorclass
defined in the script itself would be ``<class '__main__.Name'>`` when run as a
script, and the loader could not find it from another entry point. Loading a
tree that holds one of these classes needs this module imported first, since
Python tensordict resolves ``_type`` against the classes registered so far.
"""

from __future__ import annotations

from typing import Optional

import torch

from tensordict import tensorclass


@tensorclass
class CorpusInner:
    y: torch.Tensor
    tag: str


@tensorclass
class CorpusOuter:
    x: torch.Tensor
    label: str
    # Left None in the corpus: Python stores no file and no meta.json member for
    # it, and the class default restores it on load.
    maybe: Optional[torch.Tensor] = None
    note: Optional[str] = None
    inner: Optional[CorpusInner] = None
