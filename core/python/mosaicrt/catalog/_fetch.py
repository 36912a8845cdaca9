"""The catalog's HTTP fetcher for python-tuf: urllib3 with a bounded connect/read timeout, progress counting,
every transport failure turned into a TUF download error (nothing hangs, nothing escapes unnamed), and the
connection closed on every early exit (a refused download leaves no socket behind)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

import urllib3
from tuf.api import exceptions
from tuf.ngclient import FetcherInterface

_CHUNK = 256 * 1024


class CatalogFetcher(FetcherInterface):
    def __init__(self, timeout_s: float) -> None:
        self.timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)
        self._pool = urllib3.PoolManager(headers={"User-Agent": "mosaicrt-catalog"}, retries=False)
        #: called with the byte count of each received chunk (set around a target download)
        self.on_bytes: Callable[[int], None] | None = None

    def _fetch(self, url: str) -> Iterator[bytes]:
        try:
            response = self._pool.request("GET", url, preload_content=False, timeout=self.timeout)
        except urllib3.exceptions.TimeoutError as exc:
            raise exceptions.SlowRetrievalError(f"{url}: no answer within {self.timeout.connect_timeout} s") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # refused, reset, TLS: unreachable
            raise exceptions.DownloadError(f"cannot fetch {url}: {exc}") from exc
        if response.status >= 400:
            response.close()
            raise exceptions.DownloadHTTPError(f"HTTP error occurred with status {response.status}", response.status)
        return self._stream(response)

    def _stream(self, response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
        complete = False
        try:
            for chunk in response.stream(_CHUNK):
                if self.on_bytes is not None:
                    self.on_bytes(len(chunk))
                yield chunk
            complete = True
        except urllib3.exceptions.TimeoutError as exc:
            raise exceptions.SlowRetrievalError("the download stalled past the read timeout") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # the connection broke mid-body
            raise exceptions.DownloadError(f"the download was interrupted: {exc}") from exc
        finally:
            if complete:
                response.release_conn()
            else:  # stopped early (too much data, an error, or abandoned): never reuse this connection
                response.close()

    @contextmanager
    def download_file(self, url: str, max_length: int) -> Iterator[IO[bytes]]:
        """Like FetcherInterface.download_file, closing the stream when it stops early (more data than
        ``max_length`` is refused without reading the rest)."""
        chunks = self.fetch(url)
        try:
            with tempfile.TemporaryFile() as temp:
                received = 0
                for chunk in chunks:
                    received += len(chunk)
                    if received > max_length:
                        raise exceptions.DownloadLengthMismatchError(
                            f"received more than the {max_length} bytes the metadata allows"
                        )
                    temp.write(chunk)
                temp.seek(0)
                yield temp
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        self._pool.clear()
