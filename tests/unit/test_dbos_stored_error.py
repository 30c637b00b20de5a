"""How a DBOS worker quotes a workflow's stored error (issue 27 item 10): decoded, never the base64 pickle DBOS hands
back when it cannot unpickle the exception; the pickle is read opcode by opcode, never run."""

from __future__ import annotations

import base64
import io
import pickle

from installed import needs

pytestmark = needs("dbos")


class Declined(Exception):
    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def _pickled(value: object) -> str:
    """``value`` pickled as a worker without Dask pickles it: copyreg's table left out, since importing distributed
    (an earlier test's Dask cluster) installs tblib's exception picklers there, which would let ``Declined``
    unpickle and turn this test into one about test order."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = {}
    pickler.dump(value)
    return base64.b64encode(buffer.getvalue()).decode()


class Dangerous:
    def __reduce__(self):
        return (print, ("unpickling ran code",))


def test_a_stored_error_is_quoted_decoded() -> None:
    from crashpoint.harness.engines.dbos_worker import stored_error

    assert stored_error(None) is None
    assert stored_error(ValueError("bad amount")) == "ValueError: bad amount"
    assert stored_error("a plain text") == "a plain text"
    assert stored_error(base64.b64encode(pickle.dumps(KeyError("x"))).decode()) == "KeyError: 'x'"
    text = stored_error(_pickled(Declined("card declined", code="05")))
    assert text.startswith("Declined: card declined (stored pickled; not unpickled: TypeError: "), text
    assert len(stored_error("A" * 10_000)) <= 2000


def test_a_pickle_that_is_not_an_exception_is_shown_not_run(capsys) -> None:
    from crashpoint.harness.engines.dbos_worker import _pickled_text

    assert _pickled_text(pickle.dumps(Dangerous())) == "print: unpickling ran code"
    assert capsys.readouterr().out == ""
