/* Helpers of the pipeline tests: a JSON syntax checker for the statistics and trace files,
 * and a substring counter. */
#ifndef KEYER_KT_JSON_H
#define KEYER_KT_JSON_H

/* Returns the number of objects in a valid document, -1 when it is not valid JSON. */
int json_objects(const char *text);

/* Number of non-overlapping occurrences of @p needle in @p hay. */
int count(const char *hay, const char *needle);

#endif
