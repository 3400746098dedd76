"""Tests of the catalog records and the catalog.json document (c2np.catalog.records)."""

from __future__ import annotations

import json

import pytest

from c2np.catalog.records import CatalogEntry, parse_catalog_document
from c2np.catalog.shipped import catalog_entries
from c2np.errors import C2NPInputError


def test_entry_round_trips_through_json() -> None:
    entry = catalog_entries()[0]
    again = CatalogEntry.from_dict(json.loads(json.dumps(entry.to_dict())))
    assert again == entry and again.prototypes and isinstance(again.prototypes, tuple)


def test_malformed_document_and_record_are_clear_errors() -> None:
    with pytest.raises(C2NPInputError, match="cat.json: catalog file is not valid JSON \\(.*line 1"):
        parse_catalog_document("{", source="cat.json")
    with pytest.raises(C2NPInputError, match="cat.json: not a c2np catalog"):
        parse_catalog_document("[]", source="cat.json")
    record = catalog_entries()[0].to_dict()
    del record["potential"]
    with pytest.raises(C2NPInputError, match="malformed.*potential"):
        CatalogEntry.from_dict(record)
