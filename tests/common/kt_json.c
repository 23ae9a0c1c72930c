/* A minimal JSON syntax checker (RFC 8259 grammar, no semantics): see kt_json.h. */
#include <stdlib.h>
#include <string.h>

#include "kt_json.h"

typedef struct jp {
    const char *s;
    int objects; /* objects seen */
} jp;

static int jp_value(jp *p);

static void jp_ws(jp *p)
{
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t')
        p->s++;
}

static int jp_string(jp *p)
{
    if (*p->s != '"')
        return 0;
    p->s++;
    while (*p->s && *p->s != '"') {
        if ((unsigned char)*p->s < 0x20)
            return 0;
        if (*p->s == '\\') {
            p->s++;
            if (!strchr("\"\\/bfnrtu", *p->s) || !*p->s)
                return 0;
        }
        p->s++;
    }
    if (*p->s != '"')
        return 0;
    p->s++;
    return 1;
}

static int jp_number(jp *p)
{
    char *end = NULL;
    if (!(*p->s == '-' || (*p->s >= '0' && *p->s <= '9')))
        return 0;
    strtod(p->s, &end);
    if (end == p->s)
        return 0;
    p->s = end;
    return 1;
}

static int jp_value(jp *p)
{
    jp_ws(p);
    if (*p->s == '{') {
        p->s++;
        p->objects++;
        jp_ws(p);
        if (*p->s == '}') {
            p->s++;
            return 1;
        }
        for (;;) {
            jp_ws(p);
            if (!jp_string(p))
                return 0;
            jp_ws(p);
            if (*p->s++ != ':')
                return 0;
            if (!jp_value(p))
                return 0;
            jp_ws(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s == '}') {
                p->s++;
                return 1;
            }
            return 0;
        }
    }
    if (*p->s == '[') {
        p->s++;
        jp_ws(p);
        if (*p->s == ']') {
            p->s++;
            return 1;
        }
        for (;;) {
            if (!jp_value(p))
                return 0;
            jp_ws(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s == ']') {
                p->s++;
                return 1;
            }
            return 0;
        }
    }
    if (*p->s == '"')
        return jp_string(p);
    if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "null", 4)) {
        p->s += 4;
        return 1;
    }
    if (!strncmp(p->s, "false", 5)) {
        p->s += 5;
        return 1;
    }
    return jp_number(p);
}

/* Returns the number of objects in a valid document, -1 when it is not valid JSON. */
int json_objects(const char *text)
{
    jp p = {text, 0};
    if (!jp_value(&p))
        return -1;
    jp_ws(&p);
    return *p.s ? -1 : p.objects;
}

/* Number of non-overlapping occurrences of @p needle in @p hay. */
int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}
