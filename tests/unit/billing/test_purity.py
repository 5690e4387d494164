import ast
from pathlib import Path

import services.billing

BILLING = Path(services.billing.__file__).parent
# The domain core may use only these; IO adapters arrive in a later phase, in their own modules.
ALLOWED_ROOTS = {
    "__future__",
    "collections",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "io",
    "itertools",
    "json",
    "pyarrow",
    "typing",
    "services",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_billing_core_imports_no_other_service_and_no_io_library() -> None:
    for path in BILLING.glob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] in ALLOWED_ROOTS, f"{path.name} imports {name}"
            if name.startswith("services."):
                assert name.startswith("services.billing"), f"{path.name} imports {name}"
