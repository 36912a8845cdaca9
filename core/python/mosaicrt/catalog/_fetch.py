"""The catalog's HTTP fetcher: python-tuf's urllib3 fetcher with a bounded timeout, progress counting, and
every transport failure turned into a TUF download error (so nothing hangs and nothing escapes unnamed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import urllib3
from tuf.api import exceptions
from tuf.ngclient import Urllib3Fetcher


class CatalogFetcher(Urllib3Fetcher):
    def __init__(self, timeout_s: float) -> None:
        super().__init__(socket_timeout=max(1, round(timeout_s)), app_user_agent="mosaicrt-catalog")
        #: called with the byte count of each received chunk (set around a target download)
        self.on_bytes: Callable[[int], None] | None = None

    def _fetch(self, url: str) -> Iterator[bytes]:
        try:
            chunks = super()._fetch(url)
        except exceptions.DownloadError:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # refused, reset, TLS: the catalog is unreachable
            raise exceptions.DownloadError(f"cannot fetch {url}: {exc}") from exc
        return self._counted(chunks)

    def _counted(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        try:
            for chunk in chunks:
                if self.on_bytes is not None:
                    self.on_bytes(len(chunk))
                yield chunk
        except exceptions.DownloadError:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # the connection broke mid-body
            raise exceptions.DownloadError(f"the download was interrupted: {exc}") from exc
