"""An in-memory pyarrow filesystem, so `MemoryStore` runs the store's own code unchanged."""

from __future__ import annotations

import io
import threading

import pyarrow as pa
import pyarrow.fs as pafs

_ROOTS: dict[str, pafs.PyFileSystem] = {}
_LOCK = threading.Lock()


def memory_filesystem(name: str) -> pafs.PyFileSystem:
    """The process-wide in-memory filesystem called `name` (made on first use)."""
    with _LOCK:
        if name not in _ROOTS:
            _ROOTS[name] = pafs.PyFileSystem(_MemoryHandler())
        return _ROOTS[name]


class _Output(io.BytesIO):
    """A file being written: it appears, whole, when closed."""

    def __init__(self, handler: _MemoryHandler, path: str):
        super().__init__()
        self.handler, self.path = handler, path

    def close(self) -> None:
        if not self.closed:
            with self.handler.lock:
                self.handler.files[self.path] = self.getvalue()
        super().close()


class _MemoryHandler(pafs.FileSystemHandler):
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {""}
        self.lock = threading.Lock()

    # -- names -----------------------------------------------------------------------------
    @staticmethod
    def _norm(path: str) -> str:
        return path.strip("/")

    def _parents(self, path: str) -> list[str]:
        parts = path.split("/")[:-1]
        return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def _info(self, path: str) -> pafs.FileInfo:
        p = self._norm(path)
        if p in self.files:
            return pafs.FileInfo(path, pafs.FileType.File, size=len(self.files[p]))
        if p in self.dirs:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    # -- the FileSystemHandler interface ---------------------------------------------------
    def get_type_name(self) -> str:
        return "sweeper-memory"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other) -> bool:
        return self is other

    def get_file_info(self, paths):
        with self.lock:
            return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector):
        base = self._norm(selector.base_dir)
        with self.lock:
            if base not in self.dirs:
                if selector.allow_not_found:
                    return []
                raise FileNotFoundError(selector.base_dir)
            prefix = f"{base}/" if base else ""
            names = [p for p in [*self.files, *self.dirs] if p.startswith(prefix) and p != base]
            if not selector.recursive:
                names = [p for p in names if "/" not in p[len(prefix):]]
            return [self._info("/" + p) for p in sorted(names)]

    def create_dir(self, path: str, recursive: bool) -> None:
        p = self._norm(path)
        with self.lock:
            self.dirs.update([*self._parents(p), p])

    def delete_dir(self, path: str) -> None:
        self.delete_dir_contents(path)
        with self.lock:
            self.dirs.discard(self._norm(path))

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        prefix = self._norm(path) + "/"
        with self.lock:
            for p in [p for p in self.files if p.startswith(prefix)]:
                del self.files[p]
            self.dirs -= {d for d in self.dirs if d.startswith(prefix)}

    def delete_root_dir_contents(self) -> None:
        with self.lock:
            self.files.clear()
            self.dirs = {""}

    def delete_file(self, path: str) -> None:
        with self.lock:
            if self.files.pop(self._norm(path), None) is None:
                raise FileNotFoundError(path)

    def move(self, src: str, dest: str) -> None:
        with self.lock:
            self.files[self._norm(dest)] = self.files.pop(self._norm(src))

    def copy_file(self, src: str, dest: str) -> None:
        with self.lock:
            self.files[self._norm(dest)] = self.files[self._norm(src)]

    def _read(self, path: str) -> bytes:
        with self.lock:
            if self._norm(path) not in self.files:
                raise FileNotFoundError(path)
            return self.files[self._norm(path)]

    def open_input_stream(self, path: str):
        return pa.BufferReader(self._read(path))

    def open_input_file(self, path: str):
        return pa.BufferReader(self._read(path))

    def open_output_stream(self, path: str, metadata):
        p = self._norm(path)
        with self.lock:
            self.dirs.update(self._parents(p))
        return pa.PythonFile(_Output(self, p), mode="w")

    def open_append_stream(self, path: str, metadata):
        raise NotImplementedError("the store never appends: files are written whole")
