/* OrderedProducer.produce for its common case, in one C call.
 *
 * The common case: a str topic whose route is open (writable, no fence, every partition of the
 * epoch already stamped, no declared transaction, murmur2), a bytes key whose murmur2 hash is
 * cached, and no partition, callback, timestamp or headers. The record then goes to
 * hash % partition count, handed to librdkafka by the Producer's own produce().
 *
 * Why this is safe without ordo's gate lock: from reading the route to librdkafka holding the
 * record, this code runs no Python bytecode and never releases the GIL (dict lookups with exact
 * str and bytes keys, and confluent-kafka's produce, which releases it only in poll/flush), so a
 * fence, which closes the route while holding the GIL, happens wholly before or wholly after
 * it. A free-threaded build has no such guarantee: there the module refuses to build.
 *
 * Anything else, and any error from produce() (nothing was queued then), goes to the Python
 * path, which retries, waits on fences and raises what the caller must see.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#ifdef Py_GIL_DISABLED
#error "ordo._fastproduce relies on the GIL; the pure-Python path serves free-threaded builds"
#endif

typedef struct {
    PyObject_HEAD
    PyObject *routes; /* dict: topic -> partition count, only for topics open to this path */
    PyObject *hashes; /* dict: key -> murmur2 hash (non-negative int) */
    PyObject *raw;    /* confluent_kafka.Producer.produce, bound */
    PyObject *slow;   /* the Python path, with produce()'s full signature */
    vectorcallfunc vectorcall;
    Py_ssize_t fast_calls; /* records that took this path (tests and benchmarks read it) */
} FastProduce;

static PyObject *str_value, *str_key;

/* The key argument: positional #3 or keyword "key", with "value" allowed by keyword; NULL and
 * no error when the call has anything else (the Python path then serves it). */
static int
split_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **topic,
           PyObject **value, PyObject **key)
{
    Py_ssize_t i, nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs > 3)
        return 0;
    *topic = args[0];
    *value = nargs > 1 ? args[1] : Py_None;
    *key = nargs > 2 ? args[2] : NULL;
    for (i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (name == str_key && *key == NULL)
            *key = args[nargs + i];
        else if (name == str_value && nargs < 2)
            *value = args[nargs + i];
        else
            return 0; /* not interned the same, or another keyword: the Python path */
    }
    return *key != NULL;
}

static PyObject *
FastProduce_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastProduce *self = (FastProduce *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *topic, *value, *key;

    if (split_args(args, nargs, kwnames, &topic, &value, &key) && PyUnicode_CheckExact(topic) &&
        PyBytes_CheckExact(key)) {
        PyObject *count = PyDict_GetItemWithError(self->routes, topic);
        PyObject *hash = count == NULL ? NULL : PyDict_GetItemWithError(self->hashes, key);
        if (hash != NULL) {
            long n = PyLong_AsLong(count), h = PyLong_AsLong(hash);
            if (n > 0 && h >= 0) {
                PyObject *partition = PyLong_FromLong(h % n);
                if (partition != NULL) {
                    PyObject *call[4] = {topic, value, key, partition};
                    PyObject *done = PyObject_Vectorcall(self->raw, call, 4, NULL);
                    Py_DECREF(partition);
                    if (done != NULL) {
                        self->fast_calls++;
                        return done;
                    }
                }
            }
        }
        if (PyErr_Occurred())
            PyErr_Clear(); /* nothing was queued: the Python path retries or reports it */
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *
FastProduce_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *routes, *hashes, *raw, *slow;
    static char *names[] = {"routes", "hashes", "raw", "slow", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!OO", names, &PyDict_Type, &routes,
                                     &PyDict_Type, &hashes, &raw, &slow))
        return NULL;
    FastProduce *self = (FastProduce *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->routes = Py_NewRef(routes);
    self->hashes = Py_NewRef(hashes);
    self->raw = Py_NewRef(raw);
    self->slow = Py_NewRef(slow);
    self->vectorcall = FastProduce_call;
    return (PyObject *)self;
}

static int
FastProduce_traverse(FastProduce *self, visitproc visit, void *arg)
{
    Py_VISIT(self->routes);
    Py_VISIT(self->hashes);
    Py_VISIT(self->raw);
    Py_VISIT(self->slow);
    return 0;
}

static int
FastProduce_clear(FastProduce *self)
{
    Py_CLEAR(self->routes);
    Py_CLEAR(self->hashes);
    Py_CLEAR(self->raw);
    Py_CLEAR(self->slow);
    return 0;
}

static void
FastProduce_dealloc(FastProduce *self)
{
    PyObject_GC_UnTrack(self);
    FastProduce_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
FastProduce_get_fast_calls(FastProduce *self, void *closure)
{
    return PyLong_FromSsize_t(self->fast_calls);
}

static PyGetSetDef FastProduce_getset[] = {
    {"fast_calls", (getter)FastProduce_get_fast_calls, NULL, "records that took the C path", NULL},
    {NULL},
};

static PyTypeObject FastProduceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ordo._fastproduce.FastProduce",
    .tp_basicsize = sizeof(FastProduce),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "OrderedProducer.produce's common case in one C call (see the module source)",
    .tp_new = FastProduce_new,
    .tp_traverse = (traverseproc)FastProduce_traverse,
    .tp_clear = (inquiry)FastProduce_clear,
    .tp_dealloc = (destructor)FastProduce_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastProduce, vectorcall),
    .tp_getset = FastProduce_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordo._fastproduce", "OrderedProducer.produce's common case in C.", -1,
};

PyMODINIT_FUNC
PyInit__fastproduce(void)
{
    if (PyType_Ready(&FastProduceType) < 0)
        return NULL;
    str_value = PyUnicode_InternFromString("value");
    str_key = PyUnicode_InternFromString("key");
    if (str_value == NULL || str_key == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "FastProduce", (PyObject *)&FastProduceType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
