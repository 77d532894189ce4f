"""The public surface of core is locked, and core never imports the web layer."""

import ast
import subprocess
import sys

import pytest

import neardup.core.engine
import neardup.core.minhash

CORE_NAMES = {
    "MERSENNE31", "words", "shingles", "jaccard", "shingle_hashes", "perm_params", "minhash",
    "estimate", "LSH", "UnionFind", "Doc", "exact_dedup", "signatures", "clusters",
    "near_dedup", "protected_ngrams", "contaminated", "decontaminate", "PCG32", "fnv1a64",
}  # fmt: skip


def test_every_core_md_name_imports_from_core_minhash():
    assert set(neardup.core.minhash.__all__) == CORE_NAMES
    for name in CORE_NAMES:
        assert getattr(neardup.core.minhash, name) is not None
    assert neardup.core.minhash.MERSENNE31 == 2**31 - 1


ENGINE_NAMES = {
    "CLUSTER_KEY", "FORMATS", "INDEX_KEYS", "BandBuckets", "Components", "CorpusError", "Doc",
    "DuplicateIdError", "Matches", "MinhashParams", "NeardupError", "NgramIndex",
    "ParameterError", "Placement", "ProtectedFormat", "ProtectedSet", "SignatureError",
    "SignatureIndex", "Utf8Texts",
    "WorkerError", "band_digests", "batch_matches", "batch_signatures", "candidate_pairs",
    "chunk_bounds", "cluster_roots", "confirm", "corpus_format", "decontaminate_with",
    "empty_rows", "estimate", "estimates", "exact_keepers", "fan_out", "groups_of", "id_rank",
    "in_order", "jaccard", "jsonl_items", "lsh_probability", "lsh_threshold",
    "min_label_components", "ngrams", "ordered_map", "parse_protected_set", "pool_size",
    "protected_as_jsonl",
    "read_docs", "read_protected_set", "shingles", "spawn_pool", "text_digest", "text_digests",
    "words", "write_docs",
    # rows of any schema, storage, survivors (issue 12)
    "Schema", "Record", "RawLine", "RecordReader", "get_field", "set_field", "parquet_schema",
    "STDIO",
    "Output", "Source", "atomic_output", "check_output", "check_target", "expand_inputs",
    "check_apart",
    "KEEP_POLICIES", "KeepPolicy", "cluster_survivors", "exact_survivors", "RowWriter",
    "value_ranks",
    # decontamination modes, the frequency cap, reports (issue 14)
    "DECONT_KEY", "DecontMode", "DecontParams", "Protection", "Match", "sample_capped",
    "apply_mode", "decontaminate_modes", "ContaminationReport", "Thresholds",
    # every list of a report or a row's meta capped and counted (issue 22)
    "MAX_LISTED", "MAX_ITEMS", "drop_rule", "match_summary",
    # work-sized slabs for a pool, workers that load the compiled kernels (issue 13)
    "slab_bounds", "warm_worker",
    # a pool's workers ended, not waited for, when its owner wants nothing more of it
    "stop_pool",
    # one error for a script whose spawned workers re-ran it (issue 22)
    "UnguardedMainError", "raise_worker_error",
    # one id rule for the batch engines and the service (issue 23)
    "ID_PATTERN", "id_problem",
    # a stream signed here while small, then on a pool (issue 22)
    "signature_stream",
    # the tokenizers, and words with their spans in the original text (issue 21)
    "TOKENIZERS", "word_spans",
    # decontamination windows of the same amount of text in every script (issue 31)
    "window_version", "windows", "gram_spans",
    # what a contamination check is charged: its words, at least one n-gram's (issue 23)
    "charged_words",
    # JSON without NaN/Infinity, one rule for the batch engines and the service (issue 23)
    "constant_problem", "finite_value", "nan_as_null", "nan_as_null_note",
    # a cut piece's id never equals another row's (issue 23)
    "piece_source", "piece_collision", "collision_message",
    # the persistent index of kept documents (issue 20)
    "INDEX_FORMAT", "INDEX_FORMAT_VERSION", "INDEX_COLUMNS", "INDEX_PARAMS_KEY", "DocIndex",
    "IndexFile", "IndexPart", "IndexLookup", "lookup_index", "write_part", "commit_index",
    "write_part_keys",
    "index_params", "index_part_name", "index_record", "index_record_line", "run_info",
    "part_table", "binary_matrix", "IndexConflictError",
    "IndexChangedError", "IndexDamagedError", "IndexIdError", "IndexMissingError",
    "IndexParameterError", "IndexBucketError",
    "index_info", "index_leftovers", "IndexLeftover", "compact_index", "CompactResult",
    # the service's background compaction (issue 30, part 5)
    "compaction_group", "index_part_version", "rewrite_group", "compaction_run",
    "commit_compaction", "remove_leftovers",
    # one guard for every command that writes; an index in a directory of its own (issue 32)
    "check_index_home",
    # one JSON reader: long integers and deep nesting named, never a 500 (issue 32)
    "read_json", "json_text", "JSONBudget", "same_json", "JSONError", "MAX_JSON_DEPTH",
    # Parquet eval sets through the service; a plain text that is plainly items (issue 33)
    "parquet_as_jsonl", "plain_text_shape", "PlainShape",
    # re-crawled ids decided against the indexed document of the id (issue 33)
    "indexed_documents", "IndexedDocs", "recrawl_verdicts", "RECRAWL_SAME", "RECRAWL_NEAR",
    "RECRAWL_CHANGED", "RECRAWL_POLICIES", "recrawl_policy", "derived_id", "derived_ids",
    "rewrite_without", "lookup_without", "RECRAWL_REVISION",
    "delete_ids", "DeleteResult", "write_deletes", "deleted_since",
    # a protected-set upload that is not UTF-8 names its line, as the CLI does (issue 33.6)
    "utf8_error",
    # the id table's documented hash of ids (issue 30)
    "index_id_hashes", "IndexLayoutError",
}  # fmt: skip


def test_the_engine_surface_is_locked():
    """What app/, the CLI and other engines build on; changing it is a decision, not a slip."""
    assert set(neardup.core.engine.__all__) == ENGINE_NAMES
    for name in ENGINE_NAMES:
        assert getattr(neardup.core.engine, name) is not None


def test_the_engine_and_the_contract_share_their_objects():
    for name in set(neardup.core.engine.__all__) & set(neardup.core.minhash.__all__):
        assert getattr(neardup.core.engine, name) is getattr(neardup.core.minhash, name)


def _imported_by(modules: str, suspects: tuple[str, ...]) -> list[str]:
    """The modules a fresh interpreter has loaded after importing ``modules`` that are one of
    ``suspects`` or inside one of them (``neardup.app`` covers ``neardup.app.client``)."""
    code = (
        f"import sys, {modules}\n"
        f"print(sorted(m for m in sys.modules if any(m == s or m.startswith(s + '.') "
        f"for s in {suspects!r})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return list(ast.literal_eval(result.stdout))


def test_reading_a_corpus_imports_no_clustering():
    suspects = (
        "neardup.core._cluster",
        "neardup.core._signatures",
        "neardup.core._banding",
        "numpy",
    )
    assert _imported_by("neardup.core._corpus", suspects) == []


def test_core_never_imports_the_web_layer():
    suspects = ("neardup.app", "fastapi", "starlette", "pydantic", "uvicorn", "httpx")
    assert _imported_by("neardup.core.minhash, neardup.core.engine", suspects) == []


def test_the_package_top_has_the_contract_and_the_client():
    """``from neardup import X``: every name of the contract, the same objects, and the client."""
    import neardup
    import neardup.app.client

    assert set(neardup.__all__) == set(neardup.core.minhash.__all__) | {"Client", "ClientError"}
    for name in neardup.core.minhash.__all__:
        assert getattr(neardup, name) is getattr(neardup.core.minhash, name)
    assert neardup.Client is neardup.app.client.Client
    assert set(neardup.__all__) <= set(dir(neardup))
    with pytest.raises(AttributeError, match="no attribute 'engine_room'"):
        _ = neardup.engine_room


def test_importing_the_package_or_core_loads_neither_the_client_nor_numba():
    """Spawned workers import ``neardup.core``; the package's top imports its names on use."""
    assert _imported_by("neardup", ("neardup.app", "neardup.core", "numpy", "httpx")) == []
    assert _imported_by("neardup.core.minhash", ("neardup.app", "httpx", "numba")) == []
