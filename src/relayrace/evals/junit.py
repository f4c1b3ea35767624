"""JUnit XML of an eval run, for CI: a test suite per eval run, a test case per case run."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from .results import EvalResult

__all__ = ["junit_xml"]


def junit_xml(result: EvalResult) -> str:
    """The eval run as a JUnit XML document."""
    failures = sum(r.status == "failed" for r in result.runs)
    errors = sum(r.status == "error" for r in result.runs)
    suite = ET.Element("testsuite", name=f"relayrace eval {result.team}",
                       tests=str(len(result.runs)), failures=str(failures), errors=str(errors),
                       time=f"{result.seconds:.3f}")
    for run in result.runs:
        name = run.case_id if result.repeat == 1 else f"{run.case_id} #{run.repeat + 1}"
        case = ET.SubElement(suite, "testcase", classname=result.team, name=name,
                             time=f"{run.metrics.seconds:.3f}")
        if run.status == "error":
            ET.SubElement(case, "error", message=run.error).text = run.error
        elif run.status == "failed":
            failed = [c for c in run.checks if not c.passed]
            message = "; ".join(f"{c.name}: {c.detail.splitlines()[0] if c.detail else ''}"
                                for c in failed)
            body = "\n\n".join(f"{c.name}:\n{c.detail}" for c in failed)
            ET.SubElement(case, "failure", message=message).text = body
        if run.session_id:
            ET.SubElement(case, "system-out").text = f"session {run.session_id}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode")
