"""Reading "describe what you need" (English or Chinese, rule-based, offline) into a creation draft."""

from services.scheduler.domain.describe._families import MODEL_FAMILIES, ModelFamily
from services.scheduler.domain.describe._gpus import GpuFacts, MigFacts
from services.scheduler.domain.describe._reader import Description, describe
from services.scheduler.domain.describe._text import Reading

__all__ = ["MODEL_FAMILIES", "Description", "GpuFacts", "MigFacts", "ModelFamily", "Reading", "describe"]
