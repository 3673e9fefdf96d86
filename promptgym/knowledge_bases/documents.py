"""Text, Markdown, HTML and PDF files as chunks that know where they came from.

    for chunk in chunk_file("guide.md", chunk_size=800):
        chunk.source, chunk.position, chunk.page, chunk.start, chunk.end, chunk.text

A chunk's ``id`` is a hash of its source, position and text: loading the same
file again gives the same ids, so ingestion that stopped half way resumes
without duplicates, and an edited file gives new ids for what changed.

PDF text comes from pypdf (pure Python, no system library; one text per
page, ``page`` counts from 1). HTML text from BeautifulSoup (scripts, styles
and navigation dropped). Splitting is semantic-text-splitter's: it cuts at
the largest unit that fits (sections and paragraphs, then sentences, then
words), Markdown-aware for ``.md`` files, and gives each chunk's character
offset, which is what ``start``/``end`` record.

    >>> [(c.position, c.start, c.end) for c in chunk_text("One. Two. Three.", source="s.txt", chunk_size=9)]
    [(0, 0, 9), (1, 10, 16)]
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator, Optional

from promptgym.core.data_model import DataModel, Field

TEXT_SUFFIXES = {".txt", ".text", ".rst", ".log", ".csv", ".tsv", ".json", ".jsonl", ".py", ".toml", ".yaml", ".yml"}
MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
PDF_SUFFIXES = {".pdf"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | MARKDOWN_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES
MAX_FILE_BYTES = 256 * 1024 * 1024


class Chunk(DataModel):
    """A piece of a document, stored in the knowledge base's ``Chunk`` table (``id`` is the primary key)."""

    id: str = Field(description="Hash of source, position and text")
    text: str = Field(description="The chunk's text")
    source: str = Field(description="The file it came from")
    position: int = Field(description="Its index among the file's chunks, from 0")
    page: Optional[int] = Field(default=None, description="The PDF page it is on, from 1 (None for other files)")
    start: int = Field(description="Offset of its first character in the page's (or file's) text")
    end: int = Field(description="Offset just after its last character")


class DocumentError(ValueError):
    """A file that cannot be read as text (binary, not UTF-8, a PDF without text, too big)."""


def chunk_id(source: str, position: int, text: str) -> str:
    return hashlib.sha256(f"{source}\x00{position}\x00{text}".encode()).hexdigest()[:32]


def read_text_file(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise DocumentError(f"{path}: a binary file, not text (supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{path}: not UTF-8 text (byte {error.start} is {data[error.start]:#04x}); convert it "
                            "to UTF-8 first") from None


def html_to_text(html: str) -> str:
    from bs4 import BeautifulSoup  # deferred: only HTML files need it

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "nav", "header", "footer", "template"]):
        tag.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def pdf_pages(path: Path) -> list[str]:
    """Each page's text (pypdf); an error naming the file when it is not a readable PDF or has no text."""
    from pypdf import PdfReader  # deferred: only PDF files need it
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            reader.decrypt("")
        pages = [(page.extract_text() or "") for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, OSError) as error:
        raise DocumentError(f"{path}: not a readable PDF ({type(error).__name__}: {error})") from None
    if not any(page.strip() for page in pages):
        raise DocumentError(f"{path}: the PDF has no extractable text ({len(pages)} pages; a scanned PDF needs OCR)")
    return pages


def document_texts(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> list[tuple[Optional[int], str]]:
    """(page, text) pieces of a file: one per PDF page (page from 1), one (None, text) for other files."""
    path = Path(path)
    if not path.is_file():
        raise DocumentError(f"{path}: no such file")
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentError(f"{path}: {size / 1e6:.0f} MB is more than the {max_bytes / 1e6:.0f} MB limit per file "
                            "(split it, or raise max_bytes)")
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        return [(number, text) for number, text in enumerate(pdf_pages(path), start=1)]
    text = read_text_file(path)
    return [(None, html_to_text(text) if suffix in HTML_SUFFIXES else text)]


def _splitter(markdown: bool, chunk_size: int, overlap: int):
    from semantic_text_splitter import MarkdownSplitter, TextSplitter  # deferred: a compiled extension

    if not 0 <= overlap < chunk_size:
        raise ValueError(f"overlap must be >= 0 and below chunk_size ({chunk_size}), got {overlap}")
    return (MarkdownSplitter if markdown else TextSplitter)(chunk_size, overlap=overlap)


def chunk_text(text: str, *, source: str, chunk_size: int = 1000, overlap: int = 100, markdown: bool = False,
               page: Optional[int] = None, first_position: int = 0) -> list[Chunk]:
    """``text`` cut into chunks of at most ``chunk_size`` characters (``overlap`` shared between neighbours)."""
    splitter = _splitter(markdown, chunk_size, min(overlap, chunk_size - 1))
    chunks = []
    for offset, piece in splitter.chunk_indices(text):
        position = first_position + len(chunks)
        chunks.append(Chunk(id=chunk_id(source, position, piece), text=piece, source=source, position=position,
                            page=page, start=offset, end=offset + len(piece)))
    return chunks


def chunk_file(path: str | Path, *, source: str | None = None, chunk_size: int = 1000, overlap: int = 100,
               max_bytes: int = MAX_FILE_BYTES) -> list[Chunk]:
    """A file's chunks, positions counted across its pages; ``source`` defaults to the path as given."""
    path = Path(path)
    source = source or str(path)
    chunks: list[Chunk] = []
    markdown = path.suffix.lower() in MARKDOWN_SUFFIXES
    for page, text in document_texts(path, max_bytes):
        chunks += chunk_text(text, source=source, chunk_size=chunk_size, overlap=overlap, markdown=markdown,
                             page=page, first_position=len(chunks))
    return chunks


def find_documents(paths: list[str | Path]) -> Iterator[Path]:
    """The files named, and those with a supported suffix under the directories named, in a stable order."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            yield from sorted(found for found in path.rglob("*")
                              if found.is_file() and found.suffix.lower() in SUPPORTED_SUFFIXES
                              and not any(part.startswith(".") for part in found.relative_to(path).parts))
        else:
            yield path
