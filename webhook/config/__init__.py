"""PreemptGuard's ``--config`` document (docs/interfaces.md §6) and its live reload.

``model`` holds the typed, frozen settings objects, ``parse`` reads and checks the file, ``live`` keeps the
configuration in force and re-reads the file when it changes. Importers use the names re-exported here.
"""

from webhook.config import model
from webhook.config.live import LiveConfig, ReloadListener, ReloadResult
from webhook.config.model import *  # noqa: F403  (republishing the model, as PEP 8 allows a wildcard to)
from webhook.config.parse import load_config, load_config_or_defaults, parse_config

__all__ = [*model.__all__, "LiveConfig", "ReloadListener", "ReloadResult", "load_config", "load_config_or_defaults",
           "parse_config"]
