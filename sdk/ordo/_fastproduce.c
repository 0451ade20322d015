/* OrderedProducer.produce for its common case, in one C call.
 *
 * The common case: a str topic whose route is open (writable, murmur2, declared by the open
 * transaction if one is), a bytes key whose partition needs nothing of Python, and no partition,
 * callback, timestamp or headers. The record then goes to toPositive(murmur2(key)) % partition
 * count, handed to librdkafka by the Producer's own produce(). A route is the partition count, or
 * (count, frozenset of the partitions whose records need Python): those still to stamp in this
 * epoch (the first record carries the epoch stamp), and those a declared transaction left out
 * (Python raises for them). So a producer whose keys never reach a partition keeps its route for
 * the others (it had served every record in Python, 2.5 µs more each, measured), and so does a
 * declared transaction (KIP-609; it had taken Python for every record).
 *
 * During a fence the producer has acknowledged, the route is (old count, to Python, new count):
 * a key the old and the new count put in the same partition goes on here (ordo.fence, issue 43:
 * keys that stay are never stalled); a moved key's record goes to Python, which parks it until the
 * fence ends. The fence's route is set and closed under the GIL, as any other.
 *
 * murmur2 is hashed here (a few ns for a short key): a cache of Python-computed hashes missed at
 * every record of a key space larger than the cache, and a miss cost 10 µs a record in the Python
 * path (measured). The module's murmur2() serves partitioners.murmur2, whose pure-Python twin
 * tests hold it equal to.
 *
 * Why this is safe without ordo's gate lock: from reading the route to librdkafka holding the
 * record, this code runs no Python bytecode and never releases the GIL (a dict lookup with an
 * exact str key, the hash, and confluent-kafka's produce, which releases it only in poll/flush), so a
 * fence, which closes the route while holding the GIL, happens wholly before or wholly after
 * it. A free-threaded build has no such guarantee: there the module refuses to build.
 *
 * The producer's liveness lease is checked first, on CLOCK_MONOTONIC (time.monotonic()'s clock):
 * once its session has passed since its last report was sent, the operator may go ahead without
 * it, so a record queued now could land after the thresholds by the old partition count. No
 * thread of the producer has to run for that to hold: a process that wakes from a pause (SIGSTOP,
 * a VM freeze) finds the lease expired here before anything is queued.
 *
 * With the producer's own transactions (fencing="broker", ordo.own_transactions) each record
 * handed over is also appended to the open transaction's journal, a flat list: topic, value, key
 * (no tuple per record: allocating a tracked object per record cost the garbage collector's
 * passes more than the append), so an abort can send it again. While that transaction commits
 * librdkafka takes no record, so the producer *buffers*: this path then appends topic, value,
 * key and the chosen partition to a pending list instead (up to a limit), which drain() hands
 * over once the next transaction begins: the application's thread does not wait out the
 * commit's round trips.
 *
 * Anything else, and any error from produce() (nothing was queued then), goes to the Python
 * path, which retries, waits on fences and raises what the caller must see.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "_murmur2.h"

#ifdef Py_GIL_DISABLED
#error "ordo._fastproduce relies on the GIL; the pure-Python path serves free-threaded builds"
#endif

/* The producer's lease, shared by its C paths: records may be queued while now < until. */
typedef struct {
    PyObject_HEAD
    double until; /* a time.monotonic() value */
} Lease;

static PyMemberDef Lease_members[] = {
    {"until", T_DOUBLE, offsetof(Lease, until), 0, "time.monotonic() before which records may be queued"},
    {NULL},
};

static PyTypeObject LeaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ordo._fastproduce.Lease",
    .tp_basicsize = sizeof(Lease),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Until when a producer may queue records (its liveness lease)",
    .tp_new = PyType_GenericNew,
    .tp_members = Lease_members,
};

static double
monotonic_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

typedef struct {
    PyObject_HEAD
    PyObject *routes; /* dict: topic -> count or (count, to Python), only for topics open to this path */
    Lease *lease;
    PyObject *raw;     /* confluent_kafka.Producer.produce, bound (replaced when the producer is renewed) */
    PyObject *slow;    /* the Python path, with produce()'s full signature */
    PyObject *journal; /* list of the open transaction's records, or None (no own transactions) */
    PyObject *pending; /* list of records taken while a commit runs (4 items each), or None */
    int buffering;     /* a commit runs: records go to pending, not to raw */
    Py_ssize_t pending_limit; /* records pending at most; beyond, the Python path (which waits) */
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

    if (monotonic_now() < self->lease->until && split_args(args, nargs, kwnames, &topic, &value, &key) &&
        PyUnicode_CheckExact(topic) && PyBytes_CheckExact(key)) {
        PyObject *count = PyDict_GetItemWithError(self->routes, topic);
        PyObject *python = NULL; /* partitions whose records need Python (a stamp, a declaration) */
        long fenced_to = 0;      /* during a fence: its new count (a moved key's record parks, in Python) */
        if (count != NULL && PyTuple_CheckExact(count) && PyTuple_GET_SIZE(count) >= 2) {
            python = PyTuple_GET_ITEM(count, 1);
            if (PyTuple_GET_SIZE(count) == 3)
                fenced_to = PyLong_AsLong(PyTuple_GET_ITEM(count, 2));
            count = PyTuple_GET_ITEM(count, 0);
        }
        if (count != NULL) {
            long n = PyLong_AsLong(count);
            long h = n > 0 ? murmur2((const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) &
                                 0x7fffffff /* toPositive */
                           : 0;
            if (fenced_to != 0 && (fenced_to <= n || h % n != h % fenced_to))
                n = 0; /* the key moves (or the route is malformed): the Python path parks it */
            if (n > 0) {
                PyObject *partition = PyLong_FromLong(h % n);
                if (partition != NULL) {
                    int here = python == NULL ? 1 : PySet_Contains(python, partition) == 0;
                    PyObject *done = NULL;
                    if (here && self->buffering) {
                        if (self->pending != Py_None &&
                            PyList_GET_SIZE(self->pending) < 4 * self->pending_limit &&
                            PyList_Append(self->pending, topic) == 0 && PyList_Append(self->pending, value) == 0 &&
                            PyList_Append(self->pending, key) == 0 && PyList_Append(self->pending, partition) == 0) {
                            Py_DECREF(partition);
                            self->fast_calls++;
                            Py_RETURN_NONE;
                        }
                        here = 0; /* full (or out of memory): the Python path waits for the commit */
                    }
                    if (here) {
                        PyObject *call[4] = {topic, value, key, partition};
                        done = PyObject_Vectorcall(self->raw, call, 4, NULL);
                    }
                    Py_DECREF(partition);
                    if (done != NULL && self->journal != Py_None &&
                        (PyList_Append(self->journal, topic) < 0 || PyList_Append(self->journal, value) < 0 ||
                         PyList_Append(self->journal, key) < 0)) {
                        /* out of memory: the record is queued but its journal entry is broken */
                        Py_DECREF(done);
                        return NULL;
                    }
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
    PyObject *routes, *lease, *raw, *slow, *journal = Py_None, *pending = Py_None;
    Py_ssize_t pending_limit = 0;
    static char *names[] = {"routes", "lease", "raw", "slow", "journal", "pending", "pending_limit", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!OO|OOn", names, &PyDict_Type, &routes, &LeaseType, &lease,
                                     &raw, &slow, &journal, &pending, &pending_limit))
        return NULL;
    if ((journal != Py_None && !PyList_CheckExact(journal)) || (pending != Py_None && !PyList_CheckExact(pending))) {
        PyErr_SetString(PyExc_TypeError, "journal and pending must be lists or None");
        return NULL;
    }
    FastProduce *self = (FastProduce *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->routes = Py_NewRef(routes);
    self->lease = (Lease *)Py_NewRef(lease);
    self->raw = Py_NewRef(raw);
    self->slow = Py_NewRef(slow);
    self->journal = Py_NewRef(journal);
    self->pending = Py_NewRef(pending);
    self->pending_limit = pending_limit;
    self->vectorcall = FastProduce_call;
    return (PyObject *)self;
}

static int
FastProduce_traverse(FastProduce *self, visitproc visit, void *arg)
{
    Py_VISIT(self->routes);
    Py_VISIT(self->lease);
    Py_VISIT(self->raw);
    Py_VISIT(self->slow);
    Py_VISIT(self->journal);
    Py_VISIT(self->pending);
    return 0;
}

static int
FastProduce_clear(FastProduce *self)
{
    Py_CLEAR(self->routes);
    Py_CLEAR(self->lease);
    Py_CLEAR(self->raw);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->journal);
    Py_CLEAR(self->pending);
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

static PyObject *
FastProduce_get_raw(FastProduce *self, void *closure)
{
    return Py_NewRef(self->raw);
}

static int
FastProduce_set_raw(FastProduce *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "raw cannot be deleted");
        return -1;
    }
    Py_SETREF(self->raw, Py_NewRef(value));
    return 0;
}

/* Hand the pending records to raw, each to the partition chosen when it was taken, and journal
 * them; the pending list keeps what raw refused and its error is raised (BufferError when
 * librdkafka's queue is full: the caller polls and drains again). */
static PyObject *
FastProduce_drain(FastProduce *self, PyObject *unused)
{
    if (self->pending == Py_None)
        Py_RETURN_NONE;
    Py_ssize_t size = PyList_GET_SIZE(self->pending), i;
    int failed = 0;
    for (i = 0; i + 3 < size; i += 4) {
        PyObject **item = &PyList_GET_ITEM(self->pending, i);
        PyObject *call[4] = {item[0], item[1], item[2], item[3]};
        PyObject *done = PyObject_Vectorcall(self->raw, call, 4, NULL);
        if (done == NULL) {
            failed = 1;
            break;
        }
        Py_DECREF(done);
        if (self->journal != Py_None &&
            (PyList_Append(self->journal, item[0]) < 0 || PyList_Append(self->journal, item[1]) < 0 ||
             PyList_Append(self->journal, item[2]) < 0)) {
            i += 4;
            failed = 1;
            break;
        }
    }
    PyObject *error_type, *error_value, *error_tb;
    PyErr_Fetch(&error_type, &error_value, &error_tb);
    if (PyList_SetSlice(self->pending, 0, i, NULL) < 0) {
        Py_XDECREF(error_type);
        Py_XDECREF(error_value);
        Py_XDECREF(error_tb);
        return NULL;
    }
    if (failed) {
        PyErr_Restore(error_type, error_value, error_tb);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
FastProduce_get_buffering(FastProduce *self, void *closure)
{
    return PyBool_FromLong(self->buffering);
}

static int
FastProduce_set_buffering(FastProduce *self, PyObject *value, void *closure)
{
    int truth = value == NULL ? -1 : PyObject_IsTrue(value);
    if (truth < 0) {
        if (value == NULL)
            PyErr_SetString(PyExc_AttributeError, "buffering cannot be deleted");
        return -1;
    }
    self->buffering = truth;
    return 0;
}

static PyMethodDef FastProduce_methods[] = {
    {"drain", (PyCFunction)FastProduce_drain, METH_NOARGS,
     "hand the records taken during a commit to the producer, in order, and journal them"},
    {NULL},
};

static PyGetSetDef FastProduce_getset[] = {
    {"buffering", (getter)FastProduce_get_buffering, (setter)FastProduce_set_buffering,
     "a commit runs: records are taken into the pending list", NULL},
    {"fast_calls", (getter)FastProduce_get_fast_calls, NULL, "records that took the C path", NULL},
    {"raw", (getter)FastProduce_get_raw, (setter)FastProduce_set_raw,
     "the bound produce() records are handed to (a renewed producer's, after a fence)", NULL},
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
    .tp_methods = FastProduce_methods,
};

static PyObject *
murmur2_py(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "murmur2 hashes bytes, got %.200s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return PyLong_FromLong(murmur2((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg)));
}

/* partitioners.murmur2_partitions: a declared transaction's partitions (KIP-609) from its keys, a
 * mark per partition instead of a Python int and a set insertion per key. */
static PyObject *
murmur2_partitions_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "murmur2_partitions(keys, partitions) takes 2 arguments");
        return NULL;
    }
    long n = PyLong_AsLong(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "partition count must be at least 1, got %ld", n);
        return NULL;
    }
    PyObject *keys = PySequence_Fast(args[0], "keys must be a sequence of bytes, str or None");
    if (keys == NULL)
        return NULL;
    unsigned char *marked = PyMem_Calloc((size_t)n, 1);
    if (marked == NULL) {
        Py_DECREF(keys);
        return PyErr_NoMemory();
    }
    int everything = 0; /* a keyless record may go to any partition */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(keys);
    PyObject **items = PySequence_Fast_ITEMS(keys);
    for (Py_ssize_t i = 0; i < count && !everything; i++) {
        const char *data;
        Py_ssize_t length;
        if (items[i] == Py_None) {
            everything = 1;
            continue;
        }
        if (PyBytes_Check(items[i])) {
            data = PyBytes_AS_STRING(items[i]);
            length = PyBytes_GET_SIZE(items[i]);
        } else if (PyUnicode_Check(items[i])) {
            data = PyUnicode_AsUTF8AndSize(items[i], &length);
            if (data == NULL)
                goto fail;
        } else {
            PyErr_Format(PyExc_TypeError, "keys must be bytes, str or None, got %.200s",
                         Py_TYPE(items[i])->tp_name);
            goto fail;
        }
        marked[(murmur2((const unsigned char *)data, length) & 0x7fffffff) % n] = 1;
    }
    PyObject *chosen = PySet_New(NULL);
    if (chosen == NULL)
        goto fail;
    for (long p = 0; p < n; p++) {
        if (everything || marked[p]) {
            PyObject *number = PyLong_FromLong(p);
            if (number == NULL || PySet_Add(chosen, number) < 0) {
                Py_XDECREF(number);
                Py_DECREF(chosen);
                goto fail;
            }
            Py_DECREF(number);
        }
    }
    PyMem_Free(marked);
    Py_DECREF(keys);
    PyObject *frozen = PyFrozenSet_New(chosen);
    Py_DECREF(chosen);
    return frozen;
fail:
    PyMem_Free(marked);
    Py_DECREF(keys);
    return NULL;
}

static PyMethodDef functions[] = {
    {"murmur2", murmur2_py, METH_O, "The Java client's Utils.murmur2 of bytes: a signed 32-bit int."},
    {"murmur2_partitions", (PyCFunction)(void (*)(void))murmur2_partitions_py, METH_FASTCALL,
     "The partitions murmur2 puts records with these keys in (every one for a None key)."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordo._fastproduce", "OrderedProducer.produce's common case in C.", -1,
    functions,
};

PyMODINIT_FUNC
PyInit__fastproduce(void)
{
    if (PyType_Ready(&FastProduceType) < 0 || PyType_Ready(&LeaseType) < 0)
        return NULL;
    str_value = PyUnicode_InternFromString("value");
    str_key = PyUnicode_InternFromString("key");
    if (str_value == NULL || str_key == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "FastProduce", (PyObject *)&FastProduceType) < 0 ||
        PyModule_AddObjectRef(m, "Lease", (PyObject *)&LeaseType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
