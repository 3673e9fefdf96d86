"""FineTune's error (its own module: the SFT bridge raises it too, and loads only when FineTune trains)."""


class FineTuneError(ValueError):
    """FineTune cannot run as configured; the message says why and what to change."""
