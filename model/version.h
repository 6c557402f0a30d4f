/* The attnscope version (git describe of the tree it was built from), for --version, reports,
 * dumps and benchmarks. */
#ifndef AS_VERSION_H
#define AS_VERSION_H

const char *as_version(void);

#endif
