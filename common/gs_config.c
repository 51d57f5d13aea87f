/*
 * gs_config.c — the table-driven key/value half of gs_config.h: leaf
 * parsers, defaults, key=value argument lists and printing.  Plain libc.
 *
 * Values are parsed into a temporary first and stored only when valid, so
 * a failed set leaves the object unchanged.  Strings are stored in the
 * caller's fixed-size char arrays; nothing here allocates.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gs_config.h"

const struct gs_cfg_key *gs_cfg_find(const struct gs_cfg_key *table,
				     const char *name)
{
	const struct gs_cfg_key *k;

	if (table == NULL || name == NULL)
		return NULL;
	for (k = table; k->name != NULL; k++)
		if (strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

int gs_cfg_parse_uint(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p;

	if (s == NULL || *s == '\0')
		return -1;
	for (p = s; *p != '\0'; p++) {
		unsigned d;

		if (*p < '0' || *p > '9')
			return -1;
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int gs_cfg_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1", NULL };
	static const char *const no[] = { "false", "no", "off", "0", NULL };
	int i;

	if (s == NULL)
		return -1;
	for (i = 0; yes[i] != NULL; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static const struct {
	const char *name;
	uint64_t ns;
} gs_units[] = {
	/* largest first: the formatter picks the first exact divisor */
	{ "h", 3600ull * GS_NS_PER_S },
	{ "m", 60ull * GS_NS_PER_S },
	{ "s", GS_NS_PER_S },
	{ "ms", GS_NS_PER_MS },
	{ "us", GS_NS_PER_US },
	{ "ns", 1 },
};

/* "<digits>[.<digits>]<unit>", or "0".  The fraction must resolve to whole
 * nanoseconds ("1.5ns" is an error). */
int gs_cfg_parse_duration(const char *s, uint64_t *ns)
{
	uint64_t ip = 0, frac = 0, fscale = 1, unit = 0, v;
	const char *p = s;
	size_t i;
	int ndig = 0;

	if (s == NULL || *s == '\0')
		return -1;
	if (strcmp(s, "0") == 0) {
		*ns = 0;
		return 0;
	}
	for (; *p >= '0' && *p <= '9'; p++, ndig++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return -1;
		ip = ip * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		for (; *p >= '0' && *p <= '9'; p++, ndig++) {
			if (fscale >= 1000000000000000000ull)
				return -1;
			frac = frac * 10 + (uint64_t)(*p - '0');
			fscale *= 10;
		}
	}
	if (ndig == 0)
		return -1;
	for (i = 0; i < sizeof(gs_units) / sizeof(gs_units[0]); i++) {
		if (strcmp(p, gs_units[i].name) == 0) {
			unit = gs_units[i].ns;
			break;
		}
	}
	if (unit == 0)
		return -1;
	if (ip > UINT64_MAX / unit)
		return -1;
	v = ip * unit;
	if (frac != 0) {
		/* frac/fscale of a unit, exact to the nanosecond */
		if (frac > UINT64_MAX / unit)
			return -1;
		if ((frac * unit) % fscale != 0)
			return -1;
		if (v > UINT64_MAX - frac * unit / fscale)
			return -1;
		v += frac * unit / fscale;
	}
	*ns = v;
	return 0;
}

int gs_cfg_format_duration(uint64_t ns, char *buf, size_t len)
{
	size_t i;

	if (ns == 0)
		return snprintf(buf, len, "0");
	for (i = 0; i < sizeof(gs_units) / sizeof(gs_units[0]); i++)
		if (ns % gs_units[i].ns == 0)
			return snprintf(buf, len, "%" PRIu64 "%s",
					ns / gs_units[i].ns, gs_units[i].name);
	return snprintf(buf, len, "%" PRIu64 "ns", ns); /* not reached */
}

static const char gs_size_units[] = "KMGT";

int gs_cfg_parse_size(const char *s, uint64_t *bytes)
{
	uint64_t v = 0, unit = 1;
	const char *p = s;
	const char *u;
	int ndig = 0;

	if (s == NULL)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, ndig++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (ndig == 0)
		return -1;
	if (*p != '\0' && (u = strchr(gs_size_units, toupper(
		(unsigned char)*p))) != NULL) {
		unit = 1ull << (10 * (u - gs_size_units + 1));
		p++;
		if (*p == 'i' || *p == 'I')
			p++;
	}
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p != '\0')
		return -1;
	if (v > UINT64_MAX / unit)
		return -1;
	*bytes = v * unit;
	return 0;
}

int gs_cfg_format_size(uint64_t bytes, char *buf, size_t len)
{
	int i;

	if (bytes == 0)
		return snprintf(buf, len, "0");
	for (i = (int)sizeof(gs_size_units) - 2; i >= 0; i--) {
		uint64_t unit = 1ull << (10 * (i + 1));

		if (bytes % unit == 0)
			return snprintf(buf, len, "%" PRIu64 "%c",
					bytes / unit, gs_size_units[i]);
	}
	return snprintf(buf, len, "%" PRIu64, bytes);
}

static int cfg_fail(struct gs_error *err, const char *where,
		    const struct gs_cfg_key *k, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int cfg_fail(struct gs_error *err, const char *where,
		    const struct gs_cfg_key *k, const char *fmt, ...)
{
	char msg[GS_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (where != NULL && *where != '\0')
		return gs_error_set(err, GS_ECONFIG, "%s: %s: %s", where,
				    k->name, msg);
	return gs_error_set(err, GS_ECONFIG, "%s: %s", k->name, msg);
}

static int cfg_enum_list(const struct gs_cfg_key *k, char *buf, size_t len)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; k->names[i] != NULL && off < len; i++) {
		int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
				 k->names[i]);
		if (n < 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* A 64-bit value with a unit (duration, size): parsed by `parse`, its
 * range shown in the same unit by `format`; `what` names the kind and
 * its syntax in the error for a value `parse` refuses. */
static int cfg_set_unit(const struct gs_cfg_key *k, char *field,
			const char *value, const char *where,
			struct gs_error *err,
			int (*parse)(const char *, uint64_t *),
			int (*format)(uint64_t, char *, size_t),
			const char *what)
{
	char a[32], z[32];
	uint64_t u;

	if (k->size != 8)
		return cfg_fail(err, where, k, "bad table entry");
	if (parse(value, &u) < 0)
		return cfg_fail(err, where, k, "'%s' is not a %s", value, what);
	if (u < k->min || (k->max != 0 && u > k->max)) {
		format(k->min, a, sizeof(a));
		if (k->max != 0)
			format(k->max, z, sizeof(z));
		else
			snprintf(z, sizeof(z), "any");
		return cfg_fail(err, where, k, "%s out of range %s..%s", value,
				a, z);
	}
	memcpy(field, &u, 8);
	return 0;
}

int gs_cfg_set_key(const struct gs_cfg_key *k, void *obj, const char *value,
		   const char *where, struct gs_error *err)
{
	char *field = (char *)obj + k->offset;
	uint64_t u, max;
	int b, i;
	size_t n;

	if (value == NULL)
		return cfg_fail(err, where, k, "missing value");
	switch (k->type) {
	case GS_CFG_STRING:
		n = strlen(value);
		if (n + 1 > k->size)
			return cfg_fail(err, where, k,
					"too long (%zu bytes, at most %zu)", n,
					k->size - 1);
		if (n < k->min)
			return cfg_fail(err, where, k, "must not be empty");
		memset(field, 0, k->size);
		memcpy(field, value, n);
		return 0;
	case GS_CFG_UINT:
		max = k->max;
		if (max == 0)
			max = k->size == 4 ? UINT32_MAX : UINT64_MAX;
		if (gs_cfg_parse_uint(value, &u) < 0)
			return cfg_fail(err, where, k,
					"'%s' is not a non-negative integer",
					value);
		if (u < k->min || u > max)
			return cfg_fail(err, where, k,
					"%" PRIu64 " out of range %" PRIu64
					"..%" PRIu64, u, k->min, max);
		if (k->size == 4) {
			uint32_t v32 = (uint32_t)u;

			memcpy(field, &v32, 4);
		} else if (k->size == 8) {
			memcpy(field, &u, 8);
		} else {
			return cfg_fail(err, where, k, "bad table entry");
		}
		return 0;
	case GS_CFG_BOOL:
		if (k->size != sizeof(int))
			return cfg_fail(err, where, k, "bad table entry");
		if (gs_cfg_parse_bool(value, &b) < 0)
			return cfg_fail(err, where, k,
					"'%s' is not a boolean "
					"(true/false, yes/no, on/off, 1/0)",
					value);
		memcpy(field, &b, sizeof(int));
		return 0;
	case GS_CFG_DURATION:
		return cfg_set_unit(k, field, value, where, err,
				    gs_cfg_parse_duration, gs_cfg_format_duration,
				    "duration (number and unit ns/us/ms/s/m/h, "
				    "e.g. 4ms)");
	case GS_CFG_SIZE:
		return cfg_set_unit(k, field, value, where, err,
				    gs_cfg_parse_size, gs_cfg_format_size,
				    "size (a whole number with an optional unit "
				    "K/M/G/T, powers of 1024, e.g. 20G)");
	case GS_CFG_ENUM: {
		char list[200];

		if (k->size != 4 || k->names == NULL)
			return cfg_fail(err, where, k, "bad table entry");
		for (i = 0; k->names[i] != NULL; i++) {
			if (strcmp(k->names[i], value) == 0) {
				uint32_t v32 = (uint32_t)i;

				memcpy(field, &v32, 4);
				return 0;
			}
		}
		cfg_enum_list(k, list, sizeof(list));
		return cfg_fail(err, where, k, "'%s' is not one of: %s",
				value, list);
	}
	default:
		return cfg_fail(err, where, k, "bad table entry");
	}
}

int gs_cfg_set(const struct gs_cfg_key *table, void *obj, const char *key,
	       const char *value, const char *where, struct gs_error *err)
{
	const struct gs_cfg_key *k = gs_cfg_find(table, key);

	if (k == NULL) {
		if (where != NULL && *where != '\0')
			return gs_error_set(err, GS_ECONFIG,
					    "%s: %s: unknown key", where,
					    key ? key : "(null)");
		return gs_error_set(err, GS_ECONFIG, "%s: unknown key",
				    key ? key : "(null)");
	}
	return gs_cfg_set_key(k, obj, value, where, err);
}

int gs_cfg_defaults(const struct gs_cfg_key *table, void *obj,
		    struct gs_error *err)
{
	const struct gs_cfg_key *k;
	char *field;

	for (k = table; k->name != NULL; k++) {
		field = (char *)obj + k->offset;
		if (k->def == NULL) {
			memset(field, 0, k->size);
			continue;
		}
		if (gs_cfg_set_key(k, obj, k->def, "default", err) < 0) {
			if (err != NULL)
				err->code = GS_EINVAL;
			return -1;
		}
	}
	return 0;
}

int gs_cfg_parse_args(const struct gs_cfg_key *table, void *obj, int argc,
		      char *const argv[], struct gs_error *err)
{
	char key[128], where[32];
	const char *eq;
	size_t klen;
	int i;

	for (i = 0; i < argc; i++) {
		snprintf(where, sizeof(where), "argument %d", i + 1);
		eq = argv[i] ? strchr(argv[i], '=') : NULL;
		if (eq == NULL || eq == argv[i])
			return gs_error_set(err, GS_ECONFIG,
					    "%s: '%s': expected key=value",
					    where, argv[i] ? argv[i] : "");
		klen = (size_t)(eq - argv[i]);
		if (klen >= sizeof(key))
			return gs_error_set(err, GS_ECONFIG,
					    "%s: key too long", where);
		memcpy(key, argv[i], klen);
		key[klen] = '\0';
		if (gs_cfg_set(table, obj, key, eq + 1, where, err) < 0)
			return -1;
	}
	return 0;
}

int gs_cfg_format(const struct gs_cfg_key *k, const void *obj, char *buf,
		  size_t len)
{
	const char *field = (const char *)obj + k->offset;
	uint32_t v32;
	uint64_t v64;
	int b;

	switch (k->type) {
	case GS_CFG_STRING:
		return snprintf(buf, len, "%.*s", (int)k->size, field);
	case GS_CFG_UINT:
		if (k->size == 4) {
			memcpy(&v32, field, 4);
			return snprintf(buf, len, "%" PRIu32, v32);
		}
		memcpy(&v64, field, 8);
		return snprintf(buf, len, "%" PRIu64, v64);
	case GS_CFG_BOOL:
		memcpy(&b, field, sizeof(int));
		return snprintf(buf, len, "%s", b ? "true" : "false");
	case GS_CFG_DURATION:
		memcpy(&v64, field, 8);
		return gs_cfg_format_duration(v64, buf, len);
	case GS_CFG_SIZE:
		memcpy(&v64, field, 8);
		return gs_cfg_format_size(v64, buf, len);
	case GS_CFG_ENUM: {
		uint32_t n = 0;

		memcpy(&v32, field, 4);
		while (k->names[n] != NULL)
			n++;
		if (v32 >= n)
			return snprintf(buf, len, "%" PRIu32, v32);
		return snprintf(buf, len, "%s", k->names[v32]);
	}
	default:
		return -1;
	}
}

/* YAML plain scalars we can print bare; anything else is double-quoted. */
static int yaml_plain_ok(const char *s)
{
	static const char *const special[] = { "true", "false", "yes", "no",
					       "on", "off", "null", "~",
					       NULL };
	const char *p;
	int i;

	if (*s == '\0')
		return 0;
	for (i = 0; special[i] != NULL; i++)
		if (strcasecmp(s, special[i]) == 0)
			return 0;
	if (*s == '-' || *s == '.' || *s == '@')	/* '@' is reserved */
		return 0;
	for (p = s; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && strchr("_./-+@", *p) == NULL)
			return 0;
	return 1;
}

/*
 * Length of the UTF-8 sequence at p and its code point in *cp; 0 for a
 * byte that does not start a well-formed sequence (the caller then
 * escapes that single byte).
 */
static int utf8_decode(const unsigned char *p, uint32_t *cp)
{
	int n, i;

	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	*cp = p[0] & (0x7f >> n);
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && *cp < 0x800) || (n == 4 && *cp < 0x10000) ||
	    *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * Code points a YAML reader must not meet raw inside a quoted scalar:
 * the C1 controls (U+0085, NEL, is also a line break and would be
 * folded to a space), the line and paragraph separators, the byte-order
 * mark and the two non-characters libyaml refuses.
 */
static int needs_escape(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0xfeff || cp == 0xfffe || cp == 0xffff;
}

/*
 * Double-quoted YAML scalar that reads back as exactly s: backslash and
 * quote escaped, ASCII controls as \xNN, the code points above as
 * \uNNNN.  A byte that is not well-formed UTF-8 (never so for a value
 * read from YAML, which libyaml has already checked) is printed as \xNN,
 * which reads back as the Latin-1 character of that byte.
 */
static int print_quoted(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	int n;

	if (fputc('"', f) == EOF)
		return -1;
	while (*p != '\0') {
		if (*p == '"' || *p == '\\') {
			if (fprintf(f, "\\%c", *p) < 0)
				return -1;
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			if (fprintf(f, "\\x%02x", *p) < 0)
				return -1;
			p++;
		} else if (*p < 0x80) {
			if (fputc(*p, f) == EOF)
				return -1;
			p++;
		} else if ((n = utf8_decode(p, &cp)) == 0) {
			if (fprintf(f, "\\x%02x", *p) < 0)
				return -1;
			p++;
		} else if (needs_escape(cp)) {
			if (fprintf(f, "\\u%04x", (unsigned)cp) < 0)
				return -1;
			p += n;
		} else {
			if (fwrite(p, 1, (size_t)n, f) != (size_t)n)
				return -1;
			p += n;
		}
	}
	return fputc('"', f) == EOF ? -1 : 0;
}

int gs_cfg_print(const struct gs_cfg_key *table, const void *obj, int style,
		 const char *indent, FILE *f)
{
	const struct gs_cfg_key *k;
	char buf[1024];

	for (k = table; k->name != NULL; k++) {
		if (gs_cfg_format(k, obj, buf, sizeof(buf)) < 0)
			return -1;
		if (style == GS_CFG_ARGS) {
			if (fprintf(f, "%s%s=%s\n", indent ? indent : "",
				    k->name, buf) < 0)
				return -1;
			continue;
		}
		if (fprintf(f, "%s%s: ", indent ? indent : "", k->name) < 0)
			return -1;
		if (k->type == GS_CFG_STRING && !yaml_plain_ok(buf)) {
			if (print_quoted(f, buf) < 0)
				return -1;
		} else if (fputs(buf, f) == EOF) {
			return -1;
		}
		if (fputc('\n', f) == EOF)
			return -1;
	}
	return ferror(f) ? -1 : 0;
}
