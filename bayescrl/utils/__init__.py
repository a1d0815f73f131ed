"""Small shared helpers: errors, seeding, threads, JSON/YAML I/O, config overrides, plotting."""

from bayescrl.utils.errors import BayesCRLError, ConfigError, DataError
from bayescrl.utils.io import apply_overrides, load_yaml, to_jsonable, write_json
from bayescrl.utils.seeding import seed_everything, set_torch_threads

__all__ = [
    "BayesCRLError",
    "ConfigError",
    "DataError",
    "apply_overrides",
    "load_yaml",
    "seed_everything",
    "set_torch_threads",
    "to_jsonable",
    "write_json",
]
