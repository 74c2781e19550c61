"""The measured data bundled with the package (``simengine/validation/data/``, see ATTRIBUTION.md).

Read through ``importlib.resources`` so it works from a checkout and from an installed wheel.
A missing file is an error naming the file, never a silent skip.
"""

from __future__ import annotations

from importlib import resources

from ..errors import ConfigError

FILES: tuple[str, ...] = ("b200_megatron_runs.csv", "b200_op_efficiency.csv", "published_runs.csv")


def data_path(name: str):
    """A path-like (``importlib.resources.abc.Traversable``) of bundled file ``name``."""
    if name not in FILES:
        raise ConfigError([("source", f"unknown bundled file {name!r}; known: {', '.join(FILES)}")])
    return resources.files(__package__).joinpath("data", name)


def read_text(name: str) -> str:
    """The text of bundled file ``name``; ConfigError naming it when it is missing."""
    path = data_path(name)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([("source", f"bundled validation data {name} is missing or unreadable ({e.strerror or e}); "
                                      "reinstall simengine")]) from None
