/* Walks of a tree-sitter tree in C for csbench.code.treequery and for Python's identifier analysis
   (issue #28: attack speed).

   walk(root, table, slots) visits every node below the tree_sitter.Node ``root`` (root included), in
   the order of a TreeCursor walk (pre-order), with tree-sitter's own cursor, and creates a Python node
   only for the nodes whose kind the query needs: ``table[kind_id]`` (a bytes object of 65,536 entries,
   one per kind id, ERROR's 65535 included) is 0 for a kind it skips; its low 7 bits, when not 0, name
   the list the node is appended to (1 .. slots - 1), and its bit 0x80 appends it to list 0 too (the
   nodes the caller matches itself). Returns a tuple of ``slots`` lists. A TreeCursor walk in Python
   creates a node object for every node, anonymous ones included, and tree-sitter's query cursor costs
   0.4-0.5x of the parse for any pattern (docs/performance.md): here only what is captured costs.

   named_walk(node, table, field) does for csbench/code/languages/_python_scopes.py what its
   visit_children does in Python (see the function's comment): only the nodes it acts on become objects.

   tree-sitter's C functions are those of the tree_sitter binding itself (exported by its extension
   module, which links tree-sitter in): ``bind(path)`` looks them up in that loaded module, so the walk
   runs the very runtime that built the trees. The node objects are built as the binding builds them
   (binding.c, node_new_internal, py-tree-sitter 0.21.3, which csbench pins): the struct below is that
   version's ``Node``; ``bind(path, tree_sitter.Node)`` refuses a Node type of another size. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

/* tree-sitter's API types (lib/include/tree_sitter/api.h at e9b3f65, py-tree-sitter 0.21.3's core) */
typedef uint16_t TSSymbol;
typedef struct TSTree TSTree;
typedef struct {
    uint32_t context[4];
    const void *id;
    const TSTree *tree;
} TSNode;
typedef struct {
    const void *tree;
    const void *id;
    uint32_t context[2];
} TSTreeCursor;

/* py-tree-sitter 0.21.3's node object (tree_sitter/binding.c) */
typedef struct {
    PyObject_HEAD
    TSNode node;
    PyObject *children;
    PyObject *tree;
} Node;

static TSTreeCursor (*cursor_new)(TSNode);
static void (*cursor_delete)(TSTreeCursor *);
static TSNode (*cursor_node)(const TSTreeCursor *);
static bool (*goto_first_child)(TSTreeCursor *);
static bool (*goto_next_sibling)(TSTreeCursor *);
static bool (*goto_parent)(TSTreeCursor *);
static TSSymbol (*node_symbol)(TSNode);
static bool (*node_is_named)(TSNode);
static uint16_t (*cursor_field_id)(const TSTreeCursor *);
static TSNode (*child_by_field_id)(TSNode, uint16_t);
static bool (*node_is_null)(TSNode);
static PyTypeObject *node_type = NULL;

#define TABLE_SIZE 65536

static int resolve(void *library, void **slot, const char *name) {
    *slot = dlsym(library, name);
    if (*slot == NULL) {
        PyErr_Format(PyExc_ImportError, "the tree_sitter binding exports no %s", name);
        return -1;
    }
    return 0;
}

static PyObject *bind(PyObject *self, PyObject *args) {
    const char *path;
    PyObject *type;
    if (!PyArg_ParseTuple(args, "sO!", &path, &PyType_Type, &type)) return NULL;
    if (((PyTypeObject *)type)->tp_basicsize != (Py_ssize_t)sizeof(Node)) {
        PyErr_Format(PyExc_ImportError, "tree_sitter.Node has %zd bytes, not the %zu of py-tree-sitter 0.21.3",
                     ((PyTypeObject *)type)->tp_basicsize, sizeof(Node));
        return NULL;
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  /* the binding already loaded: no second copy */
    if (library == NULL) {
        const char *why = dlerror();
        PyErr_Format(PyExc_ImportError, "the tree_sitter binding %s is not loaded: %s", path, why ? why : "");
        return NULL;
    }
    if (resolve(library, (void **)&cursor_new, "ts_tree_cursor_new") ||
        resolve(library, (void **)&cursor_delete, "ts_tree_cursor_delete") ||
        resolve(library, (void **)&cursor_node, "ts_tree_cursor_current_node") ||
        resolve(library, (void **)&goto_first_child, "ts_tree_cursor_goto_first_child") ||
        resolve(library, (void **)&goto_next_sibling, "ts_tree_cursor_goto_next_sibling") ||
        resolve(library, (void **)&goto_parent, "ts_tree_cursor_goto_parent") ||
        resolve(library, (void **)&node_symbol, "ts_node_symbol") ||
        resolve(library, (void **)&node_is_named, "ts_node_is_named") ||
        resolve(library, (void **)&cursor_field_id, "ts_tree_cursor_current_field_id") ||
        resolve(library, (void **)&child_by_field_id, "ts_node_child_by_field_id") ||
        resolve(library, (void **)&node_is_null, "ts_node_is_null")) {
        dlclose(library);
        return NULL;
    }
    /* dlopen above took one more reference to the binding: kept, its functions stay valid */
    Py_XDECREF(node_type);
    node_type = (PyTypeObject *)type;
    Py_INCREF(node_type);
    Py_RETURN_NONE;
}

/* A node object for ``node`` of the tree of ``top``, as the binding's node_new_internal makes one. */
static PyObject *new_node(Node *top, TSNode node) {
    Node *made = (Node *)node_type->tp_alloc(node_type, 0);
    if (made == NULL) return NULL;
    made->node = node;
    made->children = NULL;
    Py_INCREF(top->tree);
    made->tree = top->tree;
    return (PyObject *)made;
}

/* Whether ``root`` can be walked: bind() was called and it is a node of that binding (else an error set). */
static bool walkable(PyObject *root) {
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return false;
    }
    if (Py_TYPE(root) != node_type) {
        PyErr_Format(PyExc_TypeError, "expected a tree_sitter.Node, not %.100s", Py_TYPE(root)->tp_name);
        return false;
    }
    return true;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *root;
    Py_buffer table;
    Py_ssize_t slots;
    if (!PyArg_ParseTuple(args, "Oy*n", &root, &table, &slots)) return NULL;
    PyObject *out = NULL;
    TSTreeCursor cursor;
    bool walking = false;
    if (!walkable(root)) goto done;
    if (table.len != TABLE_SIZE || slots < 1 || slots > 128) {
        PyErr_Format(PyExc_ValueError, "a table of %d bytes and 1 to 128 lists expected", TABLE_SIZE);
        goto done;
    }
    out = PyTuple_New(slots);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < slots; i++) {
        PyObject *list = PyList_New(0);
        if (list == NULL) goto fail;
        PyTuple_SET_ITEM(out, i, list);
    }
    const uint8_t *kinds = (const uint8_t *)table.buf;
    Node *top = (Node *)root;
    cursor = cursor_new(top->node);
    walking = true;
    for (;;) {
        TSNode node = cursor_node(&cursor);
        uint8_t entry = kinds[node_symbol(node)];
        if (entry) {
            uint8_t list = entry & 0x7f;
            if (list >= slots) {
                PyErr_Format(PyExc_ValueError, "the table names list %d of %zd", (int)list, slots);
                goto fail;
            }
            PyObject *made = new_node(top, node);
            if (made == NULL) goto fail;
            int failed = (list && PyList_Append(PyTuple_GET_ITEM(out, list), made) < 0) ||
                         ((entry & 0x80) && PyList_Append(PyTuple_GET_ITEM(out, 0), made) < 0);
            Py_DECREF(made);
            if (failed) goto fail;
        }
        if (goto_first_child(&cursor)) continue;
        while (!goto_next_sibling(&cursor)) {
            if (!goto_parent(&cursor)) goto done;
        }
    }
fail:
    Py_CLEAR(out);
done:
    if (walking) cursor_delete(&cursor);
    PyBuffer_Release(&table);
    return out;
}

/* named_walk(node, table, field) -> list of nodes: the walk of _PythonAnalyzer.visit_children
   (csbench/code/languages/_python_scopes.py) below ``node``, that Python makes with ``node.named_children``
   and its handlers, in the order Python meets the nodes; only the returned nodes become Python objects
   (``named_children`` makes one for every child, punctuation and keywords included). Each named child
   is treated by the low 3 bits of its kind's ``table`` entry:
     0  descended into: its named children treated in its place (``_GENERIC``);
     1  returned: the caller acts on it (a reference, a comment, a handler's node);
     2  skipped with all below it (``_NO_NAMES``);
     3  only its named children whose kind's entry has bit 8 descended into, the others skipped with all
        below them (``_string``: only an f-string's interpolations hold names);
     4  only its first child in field ``field`` treated, as a child of its own (0 to 4), the others
        skipped (``_attribute`` of a snippet with no method: ``x`` of ``x.attr``); returned when it has
        no such child (the handler, in Python, does what it does then).
   An anonymous child is skipped with all below it (``named_children`` lists none), except as the field
   child of 4 (``child_by_field_name`` gives it whatever it is). */

enum { DESCEND = 0, RETURN = 1, SKIP = 2, ENTER_MARKED = 3, FIELD_ONLY = 4, ACTION = 7, MARKED = 8 };
/* what the walk does with the children met at one depth: those of a plain node, of a 3, of a 4 whose
   field child is yet to come or was met */
enum { LEVEL_PLAIN, LEVEL_MARKED, LEVEL_FIELD, LEVEL_FIELD_DONE };

static PyObject *named_walk(PyObject *self, PyObject *args) {
    PyObject *root;
    Py_buffer table;
    int field;
    if (!PyArg_ParseTuple(args, "Oy*i", &root, &table, &field)) return NULL;
    PyObject *out = NULL;
    TSTreeCursor cursor;
    bool walking = false;
    uint8_t *levels = NULL;  /* per depth below ``root``: LEVEL_* */
    Py_ssize_t capacity = 64;
    if (!walkable(root)) goto done;
    if (table.len != TABLE_SIZE || field < 0 || field > 65535) {
        PyErr_Format(PyExc_ValueError, "a table of %d bytes and a field id expected", TABLE_SIZE);
        goto done;
    }
    levels = PyMem_Malloc(capacity);
    out = PyList_New(0);
    if (levels == NULL || out == NULL) {
        if (levels == NULL) PyErr_NoMemory();
        goto fail;
    }
    const uint8_t *kinds = (const uint8_t *)table.buf;
    Node *top = (Node *)root;
    cursor = cursor_new(top->node);
    walking = true;
    if (!goto_first_child(&cursor)) goto done;
    Py_ssize_t depth = 1;  /* below ``root``: the walk stops when it climbs back to it */
    levels[depth] = LEVEL_PLAIN;
    for (;;) {
        TSNode node = cursor_node(&cursor);
        uint8_t level = levels[depth], entry = kinds[node_symbol(node)], action = SKIP;
        if (level == LEVEL_PLAIN) {
            if (node_is_named(node)) action = entry & ACTION;
        } else if (level == LEVEL_MARKED) {
            if (node_is_named(node) && (entry & MARKED)) action = DESCEND;
        } else if (level == LEVEL_FIELD && cursor_field_id(&cursor) == field) {
            levels[depth] = LEVEL_FIELD_DONE;
            action = entry & ACTION;
        }
        if (action == FIELD_ONLY && (field == 0 || node_is_null(child_by_field_id(node, (uint16_t)field))))
            action = RETURN;
        if (action == RETURN) {
            PyObject *made = new_node(top, node);
            if (made == NULL) goto fail;
            int failed = PyList_Append(out, made) < 0;
            Py_DECREF(made);
            if (failed) goto fail;
        } else if (action == DESCEND || action == ENTER_MARKED || action == FIELD_ONLY) {
            if (goto_first_child(&cursor)) {
                if (++depth == capacity) {
                    uint8_t *more = PyMem_Realloc(levels, capacity * 2);
                    if (more == NULL) {
                        PyErr_NoMemory();
                        goto fail;
                    }
                    levels = more;
                    capacity *= 2;
                }
                levels[depth] = action == DESCEND ? LEVEL_PLAIN : action == ENTER_MARKED ? LEVEL_MARKED : LEVEL_FIELD;
                continue;
            }
        }
        while (!goto_next_sibling(&cursor)) {
            if (--depth == 0 || !goto_parent(&cursor)) goto done;
        }
    }
fail:
    Py_CLEAR(out);
done:
    if (walking) cursor_delete(&cursor);
    PyMem_Free(levels);
    PyBuffer_Release(&table);
    return out;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(path, Node): the tree_sitter binding at path (loaded) and its node type"},
    {"walk", walk, METH_VARARGS, "walk(root, table, slots) -> tuple of lists of nodes (see the source's header)"},
    {"named_walk", named_walk, METH_VARARGS, "named_walk(node, table, field) -> list of nodes (see the function's comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tswalk", "A tree-sitter walk in C", -1, methods};

PyMODINIT_FUNC PyInit__tswalk(void) { return PyModule_Create(&module); }
