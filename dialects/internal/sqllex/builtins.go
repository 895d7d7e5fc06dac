package sqllex

import (
	"slices"
	"strings"
)

// The tables of the call rules (see CallsOf), one set per flavor, in lower
// case. A function belongs on a list only if, whatever its arguments, it
// reads or computes and leaves the session as it was: no setting, role,
// variable, lock held past the transaction, temporary object, cursor,
// listener or prepared statement, and no SQL run from a string. Its
// arguments are read as any text is: f() inside lower(f()) is still a
// call. Adding a name means reading what the server's function does;
// when unsure, leave it off (a name off the list costs a session reset,
// one wrongly on it a dirty session for the next user).
//
// Sequence positions are exempt: nextval, currval and lastval
// (PostgreSQL, MariaDB sequences) and LAST_INSERT_ID() move or read the
// session's last value, as every INSERT into a table with a serial or
// AUTO_INCREMENT column does; it carries no privilege and no one's next
// statement reads another's by accident. A value planted by hand is not
// exempt: setval and LAST_INSERT_ID(expr) are session changes (see
// ChangesSession).
//
// A name on a list is the built-in only where the server resolves it to
// the built-in: a user's overload, a function of that name in another
// schema, or (MySQL, MariaDB) a stored function of a name the server has
// no built-in for, runs the user's code. The dialects read the server's
// catalog for those (see Shadows) and count such a name as a call.

// pgFunctions are PostgreSQL's built-ins (pg_catalog) known to leave the
// session alone.
var pgFunctions = set(
	// aggregates and window functions
	`count sum avg min max array_agg string_agg json_agg jsonb_agg json_object_agg jsonb_object_agg
	bool_and bool_or every bit_and bit_or bit_xor stddev stddev_pop stddev_samp variance var_pop var_samp
	percentile_cont percentile_disc mode corr covar_pop covar_samp
	row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value`,
	// conditionals
	`coalesce nullif greatest least`,
	// strings
	`lower upper initcap length char_length character_length octet_length bit_length substring substr
	position strpos trim btrim ltrim rtrim replace concat concat_ws left right lpad rpad split_part format
	md5 sha224 sha256 sha384 sha512 encode decode reverse repeat translate starts_with overlay chr ascii
	to_hex quote_ident quote_literal quote_nullable convert_from convert_to normalize string_to_array
	array_to_string string_to_table regexp_replace regexp_match regexp_matches regexp_split_to_array
	regexp_split_to_table regexp_like regexp_count regexp_instr regexp_substr
	to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank ts_rank_cd ts_headline`,
	// numbers
	`abs ceil ceiling floor round trunc mod power pow sqrt cbrt exp ln log log10 sign pi degrees radians
	sin cos tan asin acos atan atan2 div width_bucket gcd lcm scale random to_number`,
	// dates and times
	`now current_date current_time current_timestamp localtime localtimestamp clock_timestamp
	statement_timestamp transaction_timestamp timeofday date_trunc date_part extract to_char to_date
	to_timestamp make_date make_time make_timestamp make_timestamptz make_interval age justify_days
	justify_hours justify_interval date_bin isfinite`,
	// JSON
	`to_json to_jsonb row_to_json array_to_json json_build_object jsonb_build_object json_build_array
	jsonb_build_array json_object jsonb_object json_extract_path jsonb_extract_path json_extract_path_text
	jsonb_extract_path_text jsonb_set jsonb_set_lax jsonb_insert jsonb_strip_nulls json_strip_nulls
	jsonb_pretty json_array_length jsonb_array_length json_array_elements jsonb_array_elements
	json_array_elements_text jsonb_array_elements_text json_each jsonb_each json_each_text jsonb_each_text
	json_object_keys jsonb_object_keys json_typeof jsonb_typeof jsonb_path_query jsonb_path_query_array
	jsonb_path_query_first jsonb_path_exists jsonb_path_match json_populate_record jsonb_populate_record
	json_populate_recordset jsonb_populate_recordset json_to_record jsonb_to_record json_to_recordset
	jsonb_to_recordset`,
	// arrays and set-returning functions
	`array_length array_upper array_lower array_ndims array_dims array_append array_prepend array_cat
	array_remove array_replace array_position array_positions cardinality unnest generate_series
	generate_subscripts`,
	// identifiers and types
	`gen_random_uuid pg_typeof to_regclass to_regtype format_type`,
	// what the session and the server are (reading only)
	`current_database current_schema current_schemas current_setting version pg_backend_pid
	inet_client_addr inet_server_addr pg_postmaster_start_time pg_is_in_recovery txid_current
	pg_current_xact_id has_table_privilege has_schema_privilege has_column_privilege has_database_privilege
	has_function_privilege has_sequence_privilege pg_has_role pg_table_is_visible pg_get_serial_sequence
	pg_get_indexdef pg_get_constraintdef pg_get_expr pg_get_userbyid obj_description col_description
	pg_table_size pg_relation_size pg_total_relation_size pg_indexes_size pg_database_size pg_size_pretty`,
	// transaction-scoped locks (released when the transaction ends), a
	// notification (sent at commit), a pause
	`pg_advisory_xact_lock pg_advisory_xact_lock_shared pg_try_advisory_xact_lock
	pg_try_advisory_xact_lock_shared pg_notify pg_sleep`,
	// type names that are functions too (casts)
	`timestamptz timetz varbit date text bool`,
	// sequence positions (exempt, see above)
	`nextval currval lastval`,
)

// pgSessionRuled are PostgreSQL functions the session rules read
// (ChangesSession): set_config by its third argument, the session advisory
// locks as changes. They are known, so no call rule counts them.
var pgSessionRuled = set(`set_config setval pg_advisory_lock pg_advisory_lock_shared pg_try_advisory_lock
	pg_try_advisory_lock_shared pg_advisory_unlock pg_advisory_unlock_shared pg_advisory_unlock_all`)

// myFunctions are MySQL's and MariaDB's built-ins known to leave the
// session alone.
var myFunctions = set(
	// aggregates and window functions
	`count sum avg min max group_concat json_arrayagg json_objectagg bit_and bit_or bit_xor std stddev
	stddev_pop stddev_samp variance var_pop var_samp any_value grouping
	row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value`,
	// conditionals
	`if ifnull nullif coalesce isnull greatest least interval`,
	// strings
	`lower lcase upper ucase length char_length character_length octet_length bit_length substring
	substr substring_index mid position locate instr trim ltrim rtrim replace concat concat_ws left right
	lpad rpad repeat reverse insert field find_in_set elt format hex unhex md5 sha sha1 sha2 to_base64
	from_base64 char ascii ord space strcmp soundex quote regexp_replace regexp_like regexp_instr
	regexp_substr convert cast weight_string crc32 bin oct conv`,
	// numbers
	`abs ceil ceiling floor round truncate mod pow power sqrt exp ln log log2 log10 sign pi degrees
	radians sin cos tan asin acos atan atan2 cot rand`,
	// dates and times
	`now current_timestamp curdate current_date curtime current_time localtime localtimestamp sysdate
	utc_timestamp utc_date utc_time unix_timestamp from_unixtime date time timestamp year month day
	dayofmonth dayofweek dayofyear weekday week weekofyear yearweek hour minute second microsecond
	quarter monthname dayname last_day date_add date_sub adddate subdate addtime subtime datediff
	timediff timestampdiff timestampadd date_format time_format str_to_date makedate maketime extract
	convert_tz to_days from_days to_seconds sec_to_time time_to_sec period_add period_diff get_format`,
	// JSON
	`json_extract json_unquote json_object json_array json_contains json_contains_path json_keys
	json_length json_type json_valid json_set json_insert json_replace json_remove json_merge_patch
	json_merge_preserve json_search json_quote json_depth json_pretty json_value json_overlaps
	json_table`,
	// identifiers
	`uuid uuid_short uuid_to_bin bin_to_uuid is_uuid inet_aton inet_ntoa inet6_aton inet6_ntoa
	is_ipv4 is_ipv6`,
	// what the session and the server are (reading only); a pause
	`database schema user current_user session_user system_user version connection_id found_rows
	row_count charset collation coercibility is_free_lock is_used_lock sleep`,
	// sequence positions (exempt, see above)
	`last_insert_id nextval lastval`,
)

// mySessionRuled are MySQL functions the session rules read as changes.
var mySessionRuled = set(`get_lock release_lock release_all_locks setval`)

// pgSyntax are the words that, followed by '(', are PostgreSQL syntax
// wherever they stand: reserved keywords and the column-name keywords
// (which cannot name a function), types with modifiers among them.
var pgSyntax = set(`all and any array as between bigint bit both by case cast char character check coalesce
	collate column constraint dec decimal default distinct do else end except exists extract float
	for from group having in int integer intersect interval lateral limit national nchar
	not numeric offset on only or order overlay position precision primary real references
	returning row select smallint some substring table then time timestamp to trim union unique
	using values varchar when where window with nullif greatest least boolean`)

// pgOperandSyntax are PostgreSQL keywords that may also name a function
// (pgTAP has is()): syntax before '(' only right after an operand (a
// name, a string, a number, a parameter, a ')'), where no call can stand:
// a LIKE (...), a JOIN (SELECT ...).
var pgOperandSyntax = set(`is like ilike similar join overlaps`)

// leadingSyntax are statements that may open with options in parentheses:
// EXPLAIN (ANALYZE) ..., VACUUM (VERBOSE) ..., COPY (SELECT ...) TO.
var leadingSyntax = set(`explain vacuum analyze reindex cluster copy`)

// mySyntax are MySQL's: reserved words that take parentheses, and the
// types of column definitions.
var mySyntax = set(`all and any as between by case cast check collate column constraint default
	distinct else exists for from group having in index join key lateral like limit match member not
	of on or order over partition primary references regexp rlike select some table then union unique
	using values when where window with rows range
	tinyint smallint mediumint int integer bigint decimal numeric dec float double real bit char
	varchar binary varbinary tinytext text mediumtext longtext tinyblob blob mediumblob longblob enum
	set datetime timestamp time year`)

// syntaxAfter are words that are syntax before '(' only after one of the
// words given: PostgreSQL's unreserved keywords, which a function may be
// named after. (GROUP BY CUBE (…) and ROLLUP (…) read as calls: cube() is
// also a function of the cube extension.)
var syntaxAfter = map[string][]string{
	"conflict": {"on"},                 // ON CONFLICT (a)
	"key":      {"primary", "foreign"}, // PRIMARY KEY (a)
	"sets":     {"grouping"},           // GROUPING SETS (...)
	"range":    {"by"},                 // PARTITION BY RANGE (a), in CREATE and ALTER only
	"list":     {"by"},
	"hash":     {"by", "linear"},
	"columns":  {"range", "list"},                        // MySQL RANGE COLUMNS (a)
	"than":     {"less"},                                 // VALUES LESS THAN (10)
	"varying":  {"character", "char", "bit", "national"}, // character varying (64)
}

// namePositions are the words after which a name followed by '(' owns a
// list, not arguments: a table's columns (INTO, TABLE, REFERENCES, COPY,
// ANALYZE, VACUUM, IF NOT EXISTS), an index's (KEY k (a), INDEX i (a)),
// an alias's or a common table expression's (AS, WITH, RECURSIVE), a
// view's, a sampling method's (TABLESAMPLE), a function's or procedure's
// parameters where it is defined or named.
var namePositions = set(`into table references copy analyze vacuum exists key index as with recursive view
	tablesample function procedure aggregate routine`)

// myNamePositions add MySQL's INSERT/REPLACE without INTO: INSERT
// [LOW_PRIORITY|DELAYED|HIGH_PRIORITY] [IGNORE] t (a).
var myNamePositions = set(`insert replace ignore low_priority delayed high_priority`)

// set returns the words of the groups as a set.
func set(groups ...string) map[string]struct{} {
	m := make(map[string]struct{})
	for _, g := range groups {
		for _, w := range strings.Fields(g) {
			m[w] = struct{}{}
		}
	}
	return m
}

// Listed returns the names on flavor f's list (Postgres or MySQL) of
// built-ins known to leave the session alone, in lower case and sorted,
// and, in ruled, the built-ins the session rules read (set_config, the
// advisory locks, ...). A dialect asks the server's catalog which of
// them a user's function overloads or shadows (see Shadows).
func Listed(f Flavor) (harmless, ruled []string) {
	fns, rules := myFunctions, mySessionRuled
	if f&Postgres != 0 {
		fns, rules = pgFunctions, pgSessionRuled
	}
	return sortedKeys(fns), sortedKeys(rules)
}

// SyntaxNames returns, in lower case and sorted, PostgreSQL's words that
// the call rules read as syntax before '(' (pgSyntax: ORDER BY (a); and
// where they stand after a word or an operand, syntaxAfter,
// pgOperandSyntax: ON CONFLICT (a), a LIKE (b)), which a user's function
// may be named too (by, conflict, like: keywords that are not reserved)
// and then called in places the rules cannot tell from those (SELECT
// by(1), JOIN … ON conflict(a), x BETWEEN SYMMETRIC like(1) AND 2). A
// dialect asks the catalog whether a user made a function of one of them
// (see Shadows).
func SyntaxNames() []string {
	names := append(sortedKeys(pgSyntax), sortedKeys(pgOperandSyntax)...)
	for w := range syntaxAfter {
		names = append(names, w)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func sortedKeys(m map[string]struct{}) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
