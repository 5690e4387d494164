"""Where workloads' files live once they leave the host: logs, outputs and checkpoints.

One interface (ObjectStore) over obstore, so a local directory (``file:///...``, what ``make run``
uses), any S3 endpoint (``s3://bucket``) and memory (``memory://``, unit tests) behave the same; a
contract test (tests/unit/common/test_objectstore_contract.py) holds the three to it. keys.py is the
layout the node agent writes and the scheduler's API reads.
"""

from libs.common.objectstore.store import (
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreError,
    default_url,
    open_store,
)

__all__ = ["ObjectInfo", "ObjectNotFound", "ObjectStore", "ObjectStoreError", "default_url", "open_store"]
