import pytest

from tasks import get_task


@pytest.fixture(scope="session")
def box_questions():
    return get_task("boxball").questions()


@pytest.fixture(scope="session")
def box_parse():
    return get_task("boxball").parse
