"""The type stubs (__init__.pyi) name every public function, class and member of the module."""

import ast
import os

import pipesched as ps
from pipesched import _pipesched as ext


def stub_names():
    path = os.path.join(os.path.dirname(ps.__file__), "__init__.pyi")
    with open(path) as f:
        tree = ast.parse(f.read())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id
                for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets)
    return top, members


def test_every_public_name_has_a_stub():
    top, members = stub_names()
    public = {n for n in dir(ext) if not n.startswith("_")}
    assert public - top == set()
    for name in public:
        obj = getattr(ext, name)
        if not isinstance(obj, type) or issubclass(obj, Exception):
            continue
        own = {n for n, v in vars(obj).items() if not n.startswith("_")}
        if name == "OpKind":  # enum members and pybind11's enum helpers
            own -= set(obj.__members__)
        assert own - members[name] == set(), name
