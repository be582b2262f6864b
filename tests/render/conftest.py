import pytest
import sample_reports


@pytest.fixture
def doctor_report():
    return sample_reports.doctor_report()


@pytest.fixture
def fleet_report():
    return sample_reports.fleet_report()


@pytest.fixture
def hostile_report():
    return sample_reports.hostile_report()
