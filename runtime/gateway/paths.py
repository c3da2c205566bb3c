"""A tool call's path, decoded and checked once (docs/adr/0025-tool-paths.md).

The gateway decides `tool.call` on `tool:<name>/<path>` and forwards the call to the
tool's URL followed by `/<path>`. If the string it decides on and the one it forwards
could differ, an upstream that reads a path differently from the gateway (Tomcat cuts
`;parameters`, some servers decode `%2e` and `%2f` once more, Windows ones take `\\` for
`/` and drop trailing dots) acts on a path no grant covers: `read/..;/write/x` checked
as under `read/`, acted on as `/write/x`. So both come from one ToolTarget, which only
tool_target() makes, from the path as the web server decoded it (once, as every WSGI
and ASGI server does) and Django read it as UTF-8: its `resource` is what the grant is matched against
and its `url()` what is forwarded, the same text percent-encoded once.

The path is refused (ToolPathRefused, 400, `details.reason` one of PathRefusal) when an
upstream could read it as anything but its own text, rather than rewritten into
something the agent did not send. Its text then holds no `%`, so decoding the
forwarded path once or any number of times gives back exactly the text decided on; no
`;`, `\\`, `?` or `#`, so no server cuts it elsewhere; no dot segment and no empty one,
so no server's normalisation climbs out of, or merges across, the prefix it was granted
under; and nothing that NFKC normalisation changes, so a server folding fullwidth `．`
or `／` into `.` or `/` sees the same path too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import quote, unquote_to_bytes

from runtime.errors import ToolPathRefused
from runtime.gateway import tool_resource

# Characters (runtime.authz.patterns.RESOURCE_MAX is 500, with `tool:<name>/` in front).
MAX_PATH = 400
MAX_QUERY = 2000
# What stays unencoded in a forwarded segment: RFC 3986's unreserved characters and the
# sub-delimiters, `:` and `@` (a pchar), except `;`, which the path never holds.
SEGMENT_SAFE = "-._~!$&'()*+,=:@"
# A query is forwarded as it came (the grant does not cover it), so it must already be
# plain RFC 3986 characters: http.client refuses anything else, after the admission.
_QUERY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's Cc, all of it
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")  # runs of them: one UTF-8 character may take several


class PathRefusal(StrEnum):
    """Why a tool path is refused: `details.reason` of TOOL_PATH_REFUSED. A path breaking
    several rules is refused for the first of them in this order; the query is checked
    once the path has passed."""

    TOO_LONG = "too_long"  # over MAX_PATH characters, or the query over MAX_QUERY
    # Bytes that are not UTF-8: overlong forms (%C0%AE), stray continuation bytes, surrogates, U+FFFD.
    BAD_UTF8 = "bad_utf8"
    CONTROL = "control"  # NUL or another control character (C0, DEL, C1), encoded or not
    ENCODED = "encoded"  # a '%' left after the server's decoding: encoded twice (%252e), or a literal '%'
    BACKSLASH = "backslash"  # '\\', a separator to Windows servers and to some proxies
    PARAMETER = "parameter"  # ';', path parameters: Tomcat and Spring cut them before routing (`..;/`)
    DELIMITER = "delimiter"  # '?' or '#' inside the path (sent encoded): decoded again, it ends the path
    # Changed by NFKC (fullwidth '．' '／', ligatures, the one-dot leader), or invisible
    # (format characters such as U+202E), unassigned or private use.
    UNICODE = "unicode"
    # '//' or a leading '/' (servers merge them; '//' may read as a host), or a segment of spaces only.
    EMPTY_SEGMENT = "empty_segment"
    # '.' or '..', any segment of dots and spaces ('...', '.. '), or one beginning with '..' ('..::$DATA').
    DOT_SEGMENT = "dot_segment"
    QUERY = "query"  # a query string that is not plain RFC 3986 characters


_MINT = object()  # only tool_target() makes a ToolTarget


@dataclass(frozen=True, slots=True)
class ToolTarget:
    """One tool call's target as the gateway decides on it and forwards it: its tool,
    its path (decoded and checked, '' for the tool's root) and its query (forwarded as
    sent). Made only by tool_target()."""

    tool: str
    path: str
    query: str
    _made: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self._made is not _MINT:
            raise TypeError("a ToolTarget is made by tool_target() only")

    @property
    def resource(self) -> str:
        """What the call is decided on: `tool:<name>/<path>` (no query string)."""
        return tool_resource(self.tool, self.path)

    @property
    def encoded_path(self) -> str:
        """The path as forwarded: each segment percent-encoded once (UTF-8)."""
        return "/".join(quote(segment, safe=SEGMENT_SAFE) for segment in self.path.split("/"))

    def url(self, base: str) -> str:
        """The URL the call is forwarded to: the tool's `base` URL, `/`, the path, the query."""
        return f"{base}/{self.encoded_path}" + (f"?{self.query}" if self.query else "")


def tool_target(tool: str, path: str, query: str = "") -> ToolTarget:
    """The call's target, or ToolPathRefused naming the first rule its path breaks
    (PathRefusal). `path` is the path below `/gateway/tools/<name>/` as the web server
    decoded it (once, as every WSGI and ASGI server does) and Django read it as UTF-8,
    leaving bytes that are not UTF-8 as `%XX`; `query` the raw query string.

    1. Bound its length; refuse bytes that are not UTF-8 (left as `%XX` by Django, U+FFFD
       from an ASGI server, a lone surrogate), and any `%XX` that would decode to such
       bytes (an overlong `%C0%AE` sent encoded twice).
    2. Refuse, character by character, controls, `%` (it is never decoded a second time),
       `\\`, `;`, `?` and `#`; then text NFKC would change, and invisible or unassigned
       characters.
    3. Refuse empty segments and dot segments.
    4. Check the query's length and characters."""
    if len(path) > MAX_PATH:
        _refuse(PathRefusal.TOO_LONG, f"the path is over {MAX_PATH} characters")
    _utf8(path)
    _characters(path)
    _segments(path)
    if len(query) > MAX_QUERY:
        _refuse(PathRefusal.TOO_LONG, f"the query is over {MAX_QUERY} characters")
    if not _QUERY.fullmatch(query):
        _refuse(PathRefusal.QUERY, "the query must be plain RFC 3986 characters, percent-encoded once")
    return ToolTarget(tool, path, query, _MINT)


def _utf8(path: str) -> None:
    said = "the path holds bytes that are not UTF-8 (an overlong form, a truncated character or a surrogate)"
    if "\ufffd" in path:
        _refuse(PathRefusal.BAD_UTF8, said + ": U+FFFD, what a server puts in their place")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        _refuse(PathRefusal.BAD_UTF8, said)
    for escaped in _ESCAPES.findall(path):
        try:
            unquote_to_bytes(escaped).decode("utf-8")
        except UnicodeDecodeError:
            _refuse(PathRefusal.BAD_UTF8, f"{said}: {escaped[:30]}")


# Checked in PathRefusal's order: a character of an earlier class wins.
_SINGLE = (
    ("%", PathRefusal.ENCODED, "a '%' is left after decoding: the path was encoded twice, or holds a literal '%'"),
    ("\\", PathRefusal.BACKSLASH, "a backslash is a separator to some servers: send '/'"),
    (";", PathRefusal.PARAMETER, "';' starts path parameters, which some servers cut before routing"),
    ("?", PathRefusal.DELIMITER, "an encoded '?' inside the path would end it for a server that decodes again"),
    ("#", PathRefusal.DELIMITER, "an encoded '#' inside the path would end it for a server that decodes again"),
)


def _characters(text: str) -> None:
    control = _CONTROL.search(text)
    if control:
        where = control.start()
        _refuse(PathRefusal.CONTROL, f"the path holds a control character (U+{ord(text[where]):04X} at {where})")
    for char, reason, message in _SINGLE:
        if char in text:
            _refuse(reason, message)
    if text.isascii():
        return  # printable ASCII: NFKC leaves it as it is
    for position, char in enumerate(text):
        if not char.isprintable() and char != " ":
            _refuse(PathRefusal.UNICODE, f"the path holds an invisible or unassigned character (U+{ord(char):04X})")
        if unicodedata.normalize("NFKC", char) != char:
            _refuse(PathRefusal.UNICODE, f"U+{ord(char):04X} at {position} changes under NFKC normalisation")
    if unicodedata.normalize("NFKC", text) != text:  # combining sequences, which no single character shows
        _refuse(PathRefusal.UNICODE, "the path changes under NFKC normalisation: send it normalised")


def _segments(text: str) -> None:
    if not text:
        return  # the tool's root
    segments = text.split("/")
    # A trailing slash is kept (an empty last segment): it means something to many APIs.
    for segment in segments[:-1] if segments[-1] == "" else segments:
        if segment.strip(" ") == "":
            _refuse(PathRefusal.EMPTY_SEGMENT, "the path has an empty segment ('//', or a leading '/')")
        if segment.startswith("..") or segment.strip(". ") == "":
            _refuse(PathRefusal.DOT_SEGMENT, f"the path has a dot segment ({segment[:20]!r})")


def _refuse(reason: PathRefusal, message: str):
    raise ToolPathRefused(message, reason=reason.value, field="query" if reason == PathRefusal.QUERY else "path")
