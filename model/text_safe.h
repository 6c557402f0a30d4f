/* Text from files and command lines (paths, names, attributes, messages) made safe for a report
 * or a terminal: the one escape every JSON report, JUnit file, summary and listing goes through. */
#ifndef AS_TEXT_SAFE_H
#define AS_TEXT_SAFE_H

#include <stddef.h>

/* in, with every control character (C0, DEL, C1) and every byte that is not part of well-formed
 * UTF-8 written as \xNN (and the backslash as \\), into out (n bytes, always terminated, cut at a
 * character boundary): the result is valid UTF-8 with no control character, so a JSON writer
 * emits valid JSON from it, an XML writer well-formed XML, and a terminal shows it as text. */
void as_text_escape(const char *in, char *out, size_t n);

#endif
