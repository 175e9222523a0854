"""The functions Trino documents in the documents the documentation test runs:
the names of every `{function}` entry of trinodb/trino docs/src/main/sphinx/functions/*.md
(decimal, lambda and logical document operators and syntax only). The test checks
each is registered, written by the dialect as another call, Trino syntax, or listed
as absent with the reason."""

DOCUMENTED = {
    "aggregate": [
        "any_value", "arbitrary", "array_agg", "avg", "bool_and", "bool_or", "checksum",
        "count", "count_if", "every", "geometric_mean", "listagg", "max", "max_by", "min",
        "min_by", "sum", "bitwise_and_agg", "bitwise_or_agg", "bitwise_xor_agg",
        "histogram", "map_agg", "map_union", "multimap_agg", "approx_distinct",
        "approx_most_frequent", "approx_percentile", "approx_set", "merge",
        "numeric_histogram", "qdigest_agg", "tdigest_agg", "corr", "covar_pop",
        "covar_samp", "kurtosis", "regr_intercept", "regr_slope", "skewness", "stddev",
        "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp", "reduce_agg",
    ],
    "array": [
        "all_match", "any_match", "array_distinct", "array_intersect", "array_union",
        "array_except", "array_first", "array_histogram", "array_join", "array_last",
        "array_max", "array_min", "array_position", "array_remove", "array_sort",
        "arrays_overlap", "cardinality", "concat", "combinations", "contains",
        "contains_sequence", "element_at", "filter", "flatten", "ngrams", "none_match",
        "reduce", "repeat", "reverse", "sequence", "shuffle", "slice", "trim_array",
        "transform", "euclidean_distance", "dot_product", "zip", "zip_with",
    ],
    "bitwise": [
        "bit_count", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
        "bitwise_left_shift", "bitwise_right_shift", "bitwise_right_shift_arithmetic",
    ],
    "comparison": [
        "greatest", "least",
    ],
    "conditional": [
        "if", "coalesce", "nullif", "try",
    ],
    "conversion": [
        "cast", "try_cast", "format", "format_number", "parse_data_size", "typeof",
    ],
    "datetime": [
        "current_date", "current_time", "current_timestamp", "current_timezone", "date",
        "last_day_of_month", "from_iso8601_timestamp", "from_iso8601_timestamp_nanos",
        "from_iso8601_date", "at_timezone", "with_timezone", "from_unixtime",
        "from_unixtime_nanos", "localtime", "localtimestamp", "now", "to_iso8601",
        "to_milliseconds", "to_unixtime", "date_trunc", "date_add", "date_diff",
        "parse_duration", "human_readable_seconds", "date_format", "date_parse",
        "format_datetime", "parse_datetime", "extract", "day", "day_of_month",
        "day_of_week", "day_of_year", "dow", "doy", "hour", "millisecond", "minute",
        "month", "quarter", "second", "timezone_hour", "timezone_minute", "week",
        "week_of_year", "year", "year_of_week", "yow", "timezone",
    ],
    "json": [
        "json_exists", "json_query", "json_value", "json_array", "json_object",
        "is_json_scalar", "json_array_contains", "json_array_get", "json_array_length",
        "json_extract", "json_extract_scalar", "json_format", "json_parse", "json_size",
    ],
    "map": [
        "cardinality", "element_at", "map", "map_from_entries", "multimap_from_entries",
        "map_entries", "map_concat", "map_filter", "map_keys", "map_values", "map_zip_with",
        "transform_keys", "transform_values",
    ],
    "math": [
        "abs", "cbrt", "ceil", "ceiling", "degrees", "e", "exp", "floor", "ln", "log",
        "log2", "log10", "mod", "pi", "pow", "power", "radians", "round", "sign", "sqrt",
        "truncate", "width_bucket", "rand", "random", "acos", "asin", "atan", "atan2",
        "cos", "cosh", "sin", "sinh", "tan", "tanh", "cosine_distance", "cosine_similarity",
        "infinity", "is_finite", "is_infinite", "is_nan", "nan", "from_base", "to_base",
        "t_pdf", "wilson_interval_lower", "wilson_interval_upper", "beta_cdf",
        "inverse_beta_cdf", "inverse_normal_cdf", "normal_cdf", "t_cdf",
    ],
    "regexp": [
        "regexp_count", "regexp_extract_all", "regexp_extract", "regexp_like",
        "regexp_position", "regexp_replace", "regexp_split",
    ],
    "string": [
        "chr", "codepoint", "concat", "concat_ws", "ends_with", "format",
        "hamming_distance", "length", "levenshtein_distance", "lower", "lpad", "ltrim",
        "luhn_check", "overlay", "position", "replace", "reverse", "rpad", "rtrim",
        "soundex", "split", "split_part", "split_to_map", "split_to_multimap", "strpos",
        "starts_with", "substr", "substring", "title_case", "translate", "trim", "upper",
        "word_stem", "normalize", "to_utf8", "from_utf8",
    ],
    "url": [
        "url_extract_fragment", "url_extract_host", "url_extract_parameter",
        "url_extract_path", "url_extract_port", "url_extract_protocol", "url_extract_query",
        "url_encode", "url_decode",
    ],
    "window": [
        "cume_dist", "dense_rank", "ntile", "percent_rank", "rank", "row_number",
        "first_value", "last_value", "nth_value", "lead", "lag",
    ],
}
