"""`make test` runs the suite with --dist loadgroup: tests marked with one xdist_group share a
worker process, and so the expensive fixtures they share (the reference run rebuilt once, the
tiny run, the container run) are made once. pytest-xdist groups them by adding the group to
each test's id; a pytest that no longer lets it (9.2) would silently make those fixtures once
per worker and the suite minutes longer."""

import pytest

GROUP = "groups"


@pytest.mark.xdist_group(GROUP)
def test_a_marked_test_carries_its_group_under_loadgroup(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("run without --dist loadgroup: no groups to form")
    assert request.node.nodeid.endswith(f"@{GROUP}"), request.node.nodeid
