"""The engine surface: what the service, the CLI and other engines (Spark) build on.

``core.minhash`` is the contract for library users; this module is the one way in for code that
runs the algorithms at scale. Every name here works on whole batches (numpy arrays), and every
engine computes the same signatures, candidates, confirmations and components through them:

- Parameters: ``MinhashParams`` (validated once), ``INDEX_KEYS``.
- Signatures: ``batch_signatures`` (one process; the texts as ``str`` or as ``Utf8Texts``,
  what a pool's task is best sent as), ``signature_stream`` (a stream of batches: here while
  small, then on a spawn pool), ``slab_bounds`` (a batch cut into slabs of about the same
  work); ``spawn_pool`` and ``warm_worker`` (a worker ready at full
  speed), ``stop_pool`` (its workers ended, not waited for), ``fan_out``, ``in_order`` and
  ``ordered_map`` (contiguous chunks out, results back in submission order).
- Banding (one implementation: band digests, then the band's rows compared): ``band_digests``,
  ``candidate_pairs`` (a whole matrix), ``BandBuckets`` and ``SignatureIndex`` (incremental,
  one bucket entry per class of identical signatures; ``Placement``),
  ``empty_rows``, ``lsh_threshold``, ``lsh_probability``.
- Confirmation: ``estimates``, ``confirm``, ``batch_matches``.
- Components with smallest-id roots: ``cluster_roots`` and ``min_label_components`` (batch),
  ``Components`` (incremental; a deletion regroups from recomputed roots), ``groups_of``.
- Exact dedup: ``text_digest``, ``text_digests``, ``exact_keepers``, ``id_rank``.
- Decontamination: ``ProtectedSet``, ``ProtectedFormat``, ``parse_protected_set``,
  ``protected_as_jsonl``, ``parquet_as_jsonl``, ``plain_text_shape`` (``PlainShape``: a text
  sent as one plain text that is plainly items), ``read_protected_set``, ``NgramIndex``,
  ``decontaminate_with``,
  ``charged_words`` (what a check of each text is charged: its words, at least one n-gram's);
  modes and reports:
  ``Protection`` (sets less capped n-grams), ``sample_capped``, ``Match``, ``DecontMode``,
  ``DecontParams``, ``apply_mode``, ``drop_rule``, ``match_summary``, ``decontaminate_modes``,
  cut pieces' ids that could equal another document's (``piece_source``, ``piece_collision``,
  ``collision_message``),
  ``DECONT_KEY``, ``ContaminationReport``, ``Thresholds``; the caps of their lists:
  ``MAX_LISTED``, ``MAX_ITEMS``.
- Corpora: ``Doc``, ``CLUSTER_KEY``, ``FORMATS``, ``corpus_format``, ``read_docs``,
  ``write_docs``, ``jsonl_items``; rows of any schema: ``Schema``, ``Record``, ``RawLine``,
  ``RecordReader``, ``get_field``, ``set_field``, ``RowWriter``, ``parquet_schema``; one JSON
  reader for every JSON text (the batch engines and the service): ``read_json`` (no NaN or
  Infinity, no integer longer than Python reads, at most ``MAX_JSON_DEPTH`` levels; else
  ``JSONError``; ``JSONBudget`` counts several texts' values together), ``constant_problem``,
  ``finite_value``, ``nan_as_null``, ``nan_as_null_note``; ``json_text`` and ``same_json``
  write and compare a value a slice of an array a call.
- Storage (paths, directories, globs, ``-``, fsspec URLs): ``Source``, ``STDIO``,
  ``expand_inputs``, ``check_output``, ``check_target``, ``atomic_output``, ``Output``; the
  guard of every writing command: ``check_apart``, ``check_index_home``.
- A persistent index of kept documents (Parquet parts and a manifest log): ``DocIndex``
  (``open``, ``check_params``, ``check_ids``, ``id_parts``, ``id_digests``, ``id_signatures``,
  ``lookup``, ``verify``,
  ``row_groups``, ``file_urls``), ``IndexPart``, ``IndexFile``, ``IndexLookup``,
  ``lookup_index``, ``write_part``, ``index_part_name``, ``index_part_version``,
  ``commit_index``, ``index_params``,
  ``run_info``, ``index_record`` and ``index_record_line`` (a run's manifest record, and its
  line),
  ``part_table``, ``binary_matrix``, ``INDEX_FORMAT``, ``INDEX_FORMAT_VERSION``,
  ``INDEX_COLUMNS``, ``INDEX_PARAMS_KEY``, ``index_id_hashes`` (the id table's hash of ids,
  docs/index.md); what ``neardup index`` does to one: ``index_info``,
  ``index_leftovers``, ``IndexLeftover``, ``compact_index``, ``CompactResult``; a service's
  background compaction: ``compaction_group`` (the size-tiered policy), ``rewrite_group``,
  ``compaction_run``, ``commit_compaction``, ``remove_leftovers``; re-crawled
  ids (a new row whose id is indexed): ``indexed_documents``, ``IndexedDocs``,
  ``recrawl_verdicts`` (``RECRAWL_SAME``, ``RECRAWL_NEAR``, ``RECRAWL_CHANGED``),
  ``RECRAWL_POLICIES``, ``recrawl_policy``, ``derived_id`` (``RECRAWL_REVISION``),
  ``derived_ids``, ``rewrite_without``; deletes (per-part deletion vectors, docs/index.md):
  ``delete_ids`` (``DeleteResult``), ``write_deletes`` (vectors for ``commit_index(deletes=...)``),
  ``deleted_since`` (the ids a newer version deleted).
- Survivors: ``KeepPolicy``, ``KEEP_POLICIES``, ``exact_survivors``, ``cluster_survivors``.
- Text: ``words``, ``shingles``, ``ngrams``, ``jaccard``, ``estimate``.
- Errors: the tree of ``core.errors``.
"""

from __future__ import annotations

from neardup.core._apart import check_apart, check_index_home
from neardup.core._banding import (
    BandBuckets,
    band_digests,
    candidate_pairs,
    empty_rows,
    lsh_probability,
    lsh_threshold,
)
from neardup.core._cluster import cluster_roots, confirm, estimates, groups_of
from neardup.core._components import Components, min_label_components
from neardup.core._corpus import FORMATS, Doc, corpus_format, jsonl_items, read_docs, write_docs
from neardup.core._cutting import (
    DECONT_KEY,
    DecontMode,
    DecontParams,
    apply_mode,
    collision_message,
    decontaminate_modes,
    drop_rule,
    match_summary,
    piece_collision,
    piece_source,
)
from neardup.core._decont import decontaminate_with
from neardup.core._digests import exact_keepers, id_rank, text_digest, text_digests
from neardup.core._fanout import (
    chunk_bounds,
    fan_out,
    in_order,
    ordered_map,
    pool_size,
    raise_worker_error,
    spawn_pool,
    stop_pool,
)
from neardup.core._index import FORMAT as INDEX_FORMAT
from neardup.core._index import FORMAT_VERSION as INDEX_FORMAT_VERSION
from neardup.core._index import (
    DocIndex,
    IndexFile,
    IndexPart,
    commit_index,
    index_params,
    index_record,
    index_record_line,
    run_info,
    write_part,
    write_part_keys,
)
from neardup.core._index_deletes import DeleteResult, delete_ids, deleted_since, write_deletes
from neardup.core._index_ids import id_hashes as index_id_hashes
from neardup.core._index_log import part_name as index_part_name
from neardup.core._index_log import part_version as index_part_version
from neardup.core._index_lookup import IndexLookup, lookup_index, lookup_without
from neardup.core._index_ops import (
    CompactResult,
    commit_compaction,
    compact_index,
    compaction_run,
    index_info,
    remove_leftovers,
    rewrite_group,
)
from neardup.core._index_ops import Leftover as IndexLeftover
from neardup.core._index_ops import leftovers as index_leftovers
from neardup.core._index_parts import COLUMNS as INDEX_COLUMNS
from neardup.core._index_parts import PARAMS_KEY as INDEX_PARAMS_KEY
from neardup.core._index_parts import binary_matrix, part_table
from neardup.core._index_tiers import next_group as compaction_group
from neardup.core._json import (
    MAX_JSON_DEPTH,
    JSONBudget,
    constant_problem,
    finite_value,
    json_text,
    read_json,
    same_json,
)
from neardup.core._matches import MAX_LISTED, Match, Protection, sample_capped, word_spans
from neardup.core._ngrams import NgramIndex, charged_words, gram_spans
from neardup.core._params import INDEX_KEYS, MinhashParams
from neardup.core._plain import PlainShape, plain_text_shape
from neardup.core._protected import (
    ProtectedFormat,
    ProtectedSet,
    parquet_as_jsonl,
    parse_protected_set,
    protected_as_jsonl,
    read_protected_set,
)
from neardup.core._records import (
    ID_PATTERN,
    RawLine,
    Record,
    RecordReader,
    Schema,
    get_field,
    id_problem,
    parquet_schema,
    set_field,
)
from neardup.core._recrawl import CHANGED as RECRAWL_CHANGED
from neardup.core._recrawl import NEAR as RECRAWL_NEAR
from neardup.core._recrawl import (
    RECRAWL_POLICIES,
    IndexedDocs,
    derived_id,
    derived_ids,
    indexed_documents,
    recrawl_policy,
    recrawl_verdicts,
    rewrite_without,
)
from neardup.core._recrawl import REVISION as RECRAWL_REVISION
from neardup.core._recrawl import SAME as RECRAWL_SAME
from neardup.core._report import MAX_ITEMS, ContaminationReport, Thresholds
from neardup.core._signature_index import Matches, Placement, SignatureIndex, batch_matches
from neardup.core._signatures import (
    batch_signatures,
    signature_stream,
    slab_bounds,
    warm_worker,
)
from neardup.core._sketch import estimate
from neardup.core._stages import CLUSTER_KEY
from neardup.core._storage import (
    STDIO,
    Output,
    Source,
    atomic_output,
    check_output,
    check_target,
    expand_inputs,
)
from neardup.core._survivors import (
    KEEP_POLICIES,
    KeepPolicy,
    cluster_survivors,
    exact_survivors,
    value_ranks,
)
from neardup.core._text import TOKENIZERS, jaccard, ngrams, shingles, words
from neardup.core._tokens import Utf8Texts
from neardup.core._utf8 import utf8_error
from neardup.core._windows import window_version, windows
from neardup.core._writer import RowWriter, nan_as_null, nan_as_null_note
from neardup.core.errors import (
    CorpusError,
    DuplicateIdError,
    IndexBucketError,
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexIdError,
    IndexLayoutError,
    IndexMissingError,
    IndexParameterError,
    JSONError,
    NeardupError,
    ParameterError,
    SignatureError,
    UnguardedMainError,
    WorkerError,
)

__all__ = [
    "CLUSTER_KEY",
    "DECONT_KEY",
    "FORMATS",
    "ID_PATTERN",
    "INDEX_COLUMNS",
    "INDEX_FORMAT",
    "INDEX_FORMAT_VERSION",
    "INDEX_KEYS",
    "INDEX_PARAMS_KEY",
    "KEEP_POLICIES",
    "MAX_ITEMS",
    "MAX_JSON_DEPTH",
    "MAX_LISTED",
    "RECRAWL_CHANGED",
    "RECRAWL_NEAR",
    "RECRAWL_POLICIES",
    "RECRAWL_REVISION",
    "RECRAWL_SAME",
    "STDIO",
    "TOKENIZERS",
    "BandBuckets",
    "CompactResult",
    "Components",
    "ContaminationReport",
    "CorpusError",
    "DecontMode",
    "DecontParams",
    "DeleteResult",
    "Doc",
    "DocIndex",
    "DuplicateIdError",
    "IndexBucketError",
    "IndexChangedError",
    "IndexConflictError",
    "IndexDamagedError",
    "IndexFile",
    "IndexIdError",
    "IndexLayoutError",
    "IndexLeftover",
    "IndexLookup",
    "IndexMissingError",
    "IndexParameterError",
    "IndexPart",
    "IndexedDocs",
    "JSONBudget",
    "JSONError",
    "KeepPolicy",
    "Match",
    "Matches",
    "MinhashParams",
    "NeardupError",
    "NgramIndex",
    "Output",
    "ParameterError",
    "Placement",
    "PlainShape",
    "ProtectedFormat",
    "ProtectedSet",
    "Protection",
    "RawLine",
    "Record",
    "RecordReader",
    "RowWriter",
    "Schema",
    "SignatureError",
    "SignatureIndex",
    "Source",
    "Thresholds",
    "UnguardedMainError",
    "Utf8Texts",
    "WorkerError",
    "apply_mode",
    "atomic_output",
    "band_digests",
    "batch_matches",
    "batch_signatures",
    "binary_matrix",
    "candidate_pairs",
    "charged_words",
    "check_apart",
    "check_index_home",
    "check_output",
    "check_target",
    "chunk_bounds",
    "cluster_roots",
    "cluster_survivors",
    "collision_message",
    "commit_compaction",
    "commit_index",
    "compact_index",
    "compaction_group",
    "compaction_run",
    "confirm",
    "constant_problem",
    "corpus_format",
    "decontaminate_modes",
    "decontaminate_with",
    "delete_ids",
    "deleted_since",
    "derived_id",
    "derived_ids",
    "drop_rule",
    "empty_rows",
    "estimate",
    "estimates",
    "exact_keepers",
    "exact_survivors",
    "expand_inputs",
    "fan_out",
    "finite_value",
    "get_field",
    "gram_spans",
    "groups_of",
    "id_problem",
    "id_rank",
    "in_order",
    "index_id_hashes",
    "index_info",
    "index_leftovers",
    "index_params",
    "index_part_name",
    "index_part_version",
    "index_record",
    "index_record_line",
    "indexed_documents",
    "jaccard",
    "json_text",
    "jsonl_items",
    "lookup_index",
    "lookup_without",
    "lsh_probability",
    "lsh_threshold",
    "match_summary",
    "min_label_components",
    "nan_as_null",
    "nan_as_null_note",
    "ngrams",
    "ordered_map",
    "parquet_as_jsonl",
    "parquet_schema",
    "parse_protected_set",
    "part_table",
    "piece_collision",
    "piece_source",
    "plain_text_shape",
    "pool_size",
    "protected_as_jsonl",
    "raise_worker_error",
    "read_docs",
    "read_json",
    "read_protected_set",
    "recrawl_policy",
    "recrawl_verdicts",
    "remove_leftovers",
    "rewrite_group",
    "rewrite_without",
    "run_info",
    "same_json",
    "sample_capped",
    "set_field",
    "shingles",
    "signature_stream",
    "slab_bounds",
    "spawn_pool",
    "stop_pool",
    "text_digest",
    "text_digests",
    "utf8_error",
    "value_ranks",
    "warm_worker",
    "window_version",
    "windows",
    "word_spans",
    "words",
    "write_deletes",
    "write_docs",
    "write_part",
    "write_part_keys",
]
