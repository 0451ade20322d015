/* GatedConsumer's first look at a fetched batch, in one pass over the records' fields.
 *
 * A batch is handed out as it came when no record is an error event, none may carry an epoch
 * stamp (a header), and every partition is open through its last record. Learning that through
 * confluent-kafka's methods costs three calls a record (error(), headers(), partition()): about
 * 170 ns, an eighth of the raw client's whole time per record at its full rate on Kafka. This
 * module reads the same fields from confluent-kafka's Message struct: a few ns a record.
 *
 * That struct is private to confluent-kafka, so this module mirrors its first fields, the ones
 * read here (``MessageMirror``, as in confluent-kafka 2.x's confluent_kafka.h), and is used only
 * after the mirror is checked (_batch_scan._checked_c_scan): the Message type must be at
 * least as large as the mirror (``FIELDS_END``), so every read stays inside the object, and
 * Messages built with known partitions, errors and headers must read back as their methods say.
 * That pins ``headers`` and ``error``, and so the one pointer between them, ``c_headers``, which
 * a built Message never sets. Nothing read is dereferenced: only compared with NULL and None.
 * When the check fails, or this module was not built, the Python twin (_batch_scan.scan_python)
 * serves; tests hold the two equal on consumed batches. Records of any other type are refused.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    PyObject *topic;
    PyObject *value;
    PyObject *key;
    PyObject *headers;   /* NULL until headers() converts c_headers, or set by the constructor */
    void *c_headers;     /* librdkafka's headers of a consumed record, NULL when it has none */
    PyObject *error;     /* Py_None for a record, a KafkaError for an event */
    int32_t partition;
    /* further fields are not read */
} MessageMirror;

static PyObject *message_type; /* confluent_kafka.Message */

/* lasts[partition] = message: the last record of a run of that partition's records */
static int
set_last(PyObject *lasts, int32_t partition, PyObject *message)
{
    PyObject *key = PyLong_FromLong(partition);
    if (key == NULL)
        return -1;
    int result = PyDict_SetItem(lasts, key, message);
    Py_DECREF(key);
    return result;
}

/* scan(messages) -> (any_error, any_headers, {partition: its last message})
 *
 * ``any_headers`` is True when a record may have headers (a record whose headers() is an empty
 * list counts): the caller then looks at them, so an answer too cautious costs time only. */
static PyObject *
scan(PyObject *module, PyObject *messages)
{
    if (!PyList_CheckExact(messages)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a list of confluent_kafka.Message");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(messages);
    int any_error = 0, any_headers = 0;
    PyObject *lasts = PyDict_New();
    if (lasts == NULL)
        return NULL;
    int32_t run_partition = 0;
    PyObject *run_last = NULL; /* borrowed from the list */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(messages, i);
        if (Py_TYPE(item) != (PyTypeObject *)message_type) {
            Py_DECREF(lasts);
            PyErr_Format(PyExc_TypeError, "scan() takes confluent_kafka.Message only, got %R", Py_TYPE(item));
            return NULL;
        }
        MessageMirror *message = (MessageMirror *)item;
        if (message->error != NULL && message->error != Py_None)
            any_error = 1;
        if ((message->headers != NULL && message->headers != Py_None) || message->c_headers != NULL)
            any_headers = 1;
        if (run_last != NULL && message->partition != run_partition
            && set_last(lasts, run_partition, run_last) < 0) {
            Py_DECREF(lasts);
            return NULL;
        }
        run_partition = message->partition;
        run_last = item;
    }
    if (run_last != NULL && set_last(lasts, run_partition, run_last) < 0) {
        Py_DECREF(lasts);
        return NULL;
    }
    return Py_BuildValue("(OON)", any_error ? Py_True : Py_False, any_headers ? Py_True : Py_False, lasts);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, "(any error, any headers, {partition: last message}) of a fetched batch"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordo._fastscan", "GatedConsumer's look at a fetched batch in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastscan(void)
{
    PyObject *kafka = PyImport_ImportModule("confluent_kafka");
    if (kafka == NULL)
        return NULL;
    message_type = PyObject_GetAttrString(kafka, "Message");
    Py_DECREF(kafka);
    if (message_type == NULL)
        return NULL;
    if (!PyType_Check(message_type)) {
        PyErr_SetString(PyExc_ImportError, "confluent_kafka.Message is not a type");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    long fields_end = (long)(offsetof(MessageMirror, partition) + sizeof(int32_t));
    if (PyModule_AddIntConstant(m, "FIELDS_END", fields_end) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
