"""Stable 64-bit ids for strings (hash_dic keys, docs/formats/raw-format.md 4.11).

Any deterministic non-zero 64-bit id works for the analysis; blake2b keeps them stable across
processes and machines (Python's hash() is salted per process).
"""
from __future__ import annotations

import hashlib
from functools import lru_cache


@lru_cache(maxsize=1 << 16)
def name_hash(text: str) -> int:
    value = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    return value or 1
