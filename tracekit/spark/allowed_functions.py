"""The functions a query may call on Spark: an allow-list, by Spark's own names.

tracekit.spark.sandbox holds a query to it twice: tracekit refuses, before Spark reads the SQL,
a call of any other function in the SQL that sqlglot writes; and the session's own function
registries keep these functions alone, so Spark itself cannot find another.

A function is on the list when its result comes from its arguments and the rows alone: it opens no
file or connection, loads no class, and reads nothing of the catalog. Spark's built-in functions
come in groups (`DESCRIBE FUNCTION EXTENDED f` names f's group); the groups below are pure as
wholes, and are taken whole. Left off, with why:

- xml_funcs (xpath, xpath_string, ..., from_xml, schema_of_xml, to_xml): the XPath functions parse
  the document with a parser that fetches the DTD it names, over http: or from a file: (tested);
  nothing in a lake is XML.
- misc_funcs' reflect, java_method and try_reflect: they call any static Java method of any class
  on the classpath (System.exit, Files.readString...). The rest of misc_funcs is left off too but
  for the few below: the catalog's and the session's names, encryption keys, bitmaps.
- avro_funcs and protobuf_funcs: from_protobuf reads a descriptor file by its path; nothing in a
  lake is Avro or Protobuf.
- the table function python_worker_logs: the Python workers' logs, other queries' output.
- sketch_funcs, variant_funcs, csv_funcs, url_funcs, st_funcs, vector_funcs: pure, but nothing a
  trace query needs; a group is added here when one does (their aggregates in agg_funcs stay).
- string_funcs' randstr: a random string of any length, made on the driver, where a length of
  2,000,000,000 killed Spark's JVM (repeat, lpad and the like fail that query alone, and stay).

A function Spark adds in a later version is on no list, so it is refused until someone reads what
it does and adds it here. tracekit's own SQL (views.sql, the named queries, the finding rules, as
tracekit.spark.dialect translates them) calls only listed functions: tests/test_spark.py runs
every one of them under both locks.
"""

# Spark's groups of built-in functions, each pure as a whole, taken whole.
# Left off the groups taken whole below, for the reasons above.
LEFT_OFF = frozenset({"randstr"})
PURE_GROUPS = {
    # Aggregates: count, sum, avg, min/max(_by), percentiles, collect_list, listagg, statistics, sketches.
    "agg_funcs": (
        "any any_value approx_count_distinct approx_percentile approx_top_k approx_top_k_accumulate "
        "approx_top_k_combine array_agg avg bit_and bit_or bit_xor bitmap_and_agg bitmap_construct_agg "
        "bitmap_or_agg bool_and bool_or collect_list collect_set collect_union corr count count_if "
        "count_min_sketch covar_pop covar_samp every first first_value grouping grouping_id histogram_numeric "
        "hll_sketch_agg hll_union_agg kll_merge_agg_bigint kll_merge_agg_double kll_merge_agg_float "
        "kll_sketch_agg_bigint kll_sketch_agg_double kll_sketch_agg_float kurtosis last last_value listagg "
        "max max_by mean measure median min min_by mode percentile percentile_approx percentile_cont "
        "percentile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy "
        "regr_syy skewness some std stddev stddev_pop stddev_samp string_agg sum theta_intersection_agg "
        "theta_sketch_agg theta_union_agg try_avg try_sum tuple_intersection_agg_double "
        "tuple_intersection_agg_integer tuple_sketch_agg_double tuple_sketch_agg_integer "
        "tuple_union_agg_double tuple_union_agg_integer var_pop var_samp variance"),
    # Window functions: row_number, rank, lag, lead, ntile...
    "window_funcs": "counter_diff cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number",
    # Arithmetic (its operators too: Spark lists + and % as functions), rounding, logs, trigonometry, random numbers.
    "math_funcs": (
        "% * + - / abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos cosh cot "
        "csc degrees div e exp expm1 factorial floor greatest hex hypot least ln log log10 log1p log2 mod "
        "negative pi pmod positive pow power radians rand randn random rint round sec sign signum sin sinh "
        "sqrt tan tanh try_add try_divide try_mod try_multiply try_subtract unhex uniform width_bucket"),
    # Bitwise operators and shifts.
    "bitwise_funcs": "& << >> >>> ^ bit_count bit_get getbit shiftleft shiftright shiftrightunsigned | ~",
    # Comparisons, and/or/not, in, like, rlike, isnull.
    "predicate_funcs": (
        "! < <= <=> = == > >= and equal_null ilike in isnan isnotnull isnull like not or regexp regexp_like "
        "rlike"),
    # if, coalesce, nullif, nvl, between.
    "conditional_funcs": "between coalesce if ifnull nanvl nullif nullifzero nvl nvl2 when zeroifnull",
    # cast and its shorthands (int(x), string(x)...).
    "conversion_funcs": ("bigint binary boolean cast date decimal double float int smallint string time timestamp "
                         "tinyint"),
    # Text: length, lower, substring, regexp_*, split, lpad, concat_ws, format_number...
    "string_funcs": (
        "ascii base64 bit_length btrim char char_length character_length chr collate collation concat_ws "
        "contains decode elt encode endswith find_in_set format_number format_string from_base32 initcap "
        "instr is_valid_utf8 jaro_winkler_similarity lcase left len length levenshtein locate lower lpad "
        "ltrim luhn_check make_valid_utf8 mask octet_length overlay position printf quote randstr "
        "regexp_count regexp_extract regexp_extract_all regexp_instr regexp_replace regexp_substr repeat "
        "replace right rpad rtrim sentences soundex space split split_part startswith substr substring "
        "substring_index to_base32 to_binary to_char to_number to_varchar translate trim try_to_binary "
        "try_to_number try_validate_utf8 ucase unbase64 upper validate_utf8"),
    # Dates, times and intervals.
    "datetime_funcs": (
        "add_months convert_timezone curdate current_date current_time current_timestamp current_timezone "
        "date_add date_diff date_format date_from_unix_date date_part date_sub date_trunc dateadd datediff "
        "datepart day dayname dayofmonth dayofweek dayofyear extract from_unixtime from_utc_timestamp hour "
        "last_day localtime localtimestamp make_date make_dt_interval make_interval make_time make_timestamp "
        "make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month monthname months_between "
        "next_day now quarter second session_window time_bucket time_diff time_from_micros time_from_millis "
        "time_from_seconds time_to_micros time_to_millis time_to_seconds time_trunc timestamp_micros "
        "timestamp_millis timestamp_nanos timestamp_seconds to_date to_time to_timestamp to_timestamp_ltz "
        "to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc try_make_interval try_make_timestamp "
        "try_make_timestamp_ltz try_make_timestamp_ntz try_to_date try_to_time try_to_timestamp unix_date "
        "unix_micros unix_millis unix_nanos unix_seconds unix_timestamp weekday weekofyear window window_time "
        "year"),
    # Arrays.
    "array_funcs": (
        "array array_append array_compact array_contains array_distinct array_except array_insert "
        "array_intersect array_join array_max array_min array_position array_prepend array_remove "
        "array_repeat array_size array_union arrays_overlap arrays_zip flatten get sequence shuffle slice "
        "sort_array"),
    # Arrays and maps alike: size, element_at, concat, reverse.
    "collection_funcs": "cardinality concat element_at reverse size try_element_at",
    # Maps.
    "map_funcs": (
        "map map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys map_values "
        "str_to_map"),
    # Structs.
    "struct_funcs": "named_struct struct",
    # Higher-order functions over arrays and maps (transform, filter, aggregate, array_sort...).
    "lambda_funcs": (
        "aggregate array_sort exists filter forall map_filter map_zip_with reduce transform transform_keys "
        "transform_values zip_with"),
    # Rows from an array, a map or values (explode, inline, stack).
    "generator_funcs": "explode explode_outer inline inline_outer posexplode posexplode_outer stack",
    # JSON text (the lake's args and metadata columns): get_json_object, from_json, to_json...
    "json_funcs": "from_json get_json_object json_array_length json_object_keys json_tuple schema_of_json to_json",
    # Hashes of values: md5, sha2, xxhash64...
    "hash_funcs": "crc32 hash md5 sha sha1 sha2 xxhash64",
}

# Of misc_funcs, the pure ones: a value's type, a query's own failure, ids, the lake file a row came from.
MISC = ("assert_true input_file_block_length input_file_block_start input_file_name monotonically_increasing_id "
        "raise_error spark_partition_id typeof uuid")

# Table functions (FROM f(...)): rows from values (DuckDB's range and unnest translate to these).
TABLE_FUNCTIONS = "explode explode_outer inline inline_outer json_tuple posexplode posexplode_outer range stack"

# Written by sqlglot as calls, but read by Spark's parser itself, not looked up: in no registry.
SYNTAX = "try_cast"

ALLOWED = frozenset(name for names in [*PURE_GROUPS.values(), MISC, TABLE_FUNCTIONS, SYNTAX]
                    for name in names.split()) - LEFT_OFF
