#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_lines", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__lines(void) { return PyModule_Create(&mod); }
