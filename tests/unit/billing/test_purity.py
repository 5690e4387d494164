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
    "types",
    "typing",
    "services",
}
# The IO adapters and the service shell around the core; everything else in the package is core.
ADAPTERS = {
    "__main__.py",
    "api.py",
    "api_config.py",
    "app.py",
    "export_stream.py",
    "handlers.py",
    "ledger_store.py",
    "loops.py",
    "metering.py",
    "reconciliation.py",
    "settings.py",
    "store.py",
    "views.py",
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
        if path.name in ADAPTERS:
            continue
        for name in _imports(path):
            assert name.split(".")[0] in ALLOWED_ROOTS, f"{path.name} imports {name}"
            if name.startswith("services."):
                assert name.startswith("services.billing"), f"{path.name} imports {name}"


def test_core_modules_never_import_the_adapters() -> None:
    adapters = {f"services.billing.{name.removesuffix('.py')}" for name in ADAPTERS}
    for path in BILLING.glob("*.py"):
        if path.name not in ADAPTERS:
            assert not (_imports(path) & adapters), f"{path.name} imports an IO adapter"
