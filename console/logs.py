"""Log lines as JSON (STEWARD_LOG_FORMAT=json): one object per line, for a log shipper
that would otherwise have to parse the plain format's free text."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# LogRecord's own attributes; anything else on a record came from `extra=` and is kept.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "at": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        return json.dumps(line, default=str)
