"""Post-import hooks: run a callback right after a watched module's body has executed.

A `MetaPathFinder` placed first on `sys.meta_path` answers only for the watched names: it asks
the remaining finders for the real spec and wraps the loader's `exec_module`, so the callback
runs after the module body (docs/formats/tensorflow-capture.md 10.2).  Afterwards the module's
loader is
restored to the real one, so nothing of the hook stays visible.  Standard library only, and
not even `importlib.abc` (8 ms to import): this module is loaded at every interpreter start
when msprof_cli's .pth is installed.  The hook costs one dict lookup per import.
"""
from __future__ import annotations

import sys
from types import ModuleType
from collections.abc import Callable

Callback = Callable[[ModuleType], None]


class _PostImportFinder:
    """A `sys.meta_path` finder (duck-typed) answering only for the watched names."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._busy: set[str] = set()  # names being resolved (the import lock serialises)

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname not in self.callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)  # the real finders must not come back here
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_loader = spec.loader
        callbacks = self.callbacks.pop(fullname)
        spec.loader = _WrappingLoader(real_loader, callbacks)
        return spec


class _WrappingLoader:
    def __init__(self, real: object, callbacks: list[Callback]) -> None:
        self.real = real
        self.callbacks = callbacks

    def create_module(self, spec):  # type: ignore[override]
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.real.exec_module(module)  # type: ignore[attr-defined]
        finally:
            # hide the wrapper: the module looks as if imported normally
            module.__loader__ = self.real
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self.real
        for callback in self.callbacks:
            callback(module)  # callbacks guard themselves (agent failures never propagate)

    def __getattr__(self, name: str):  # e.g. get_resource_reader, is_package
        return getattr(self.real, name)


_FINDER: _PostImportFinder | None = None


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` right after `name` is imported (now, if it already is)."""
    global _FINDER
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    if _FINDER is None:
        _FINDER = _PostImportFinder()
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.callbacks.setdefault(name, []).append(callback)
