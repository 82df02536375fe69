"""Tests of the report client's reading of Placement's answers."""

from nova.scheduler.client import report
from nova import test


class TestUnknownTrait(test.TestCase):

    def test_refusal_naming_an_unknown_trait(self):
        # Placement's words for GET /allocation_candidates and
        # GET /resource_providers (one trait, or several).
        self.assertTrue(report.names_unknown_trait(
            400, "No such trait(s): CUSTOM_PCI_GROUP_SIZE_8"))
        self.assertTrue(report.names_unknown_trait(
            400, "Invalid query string parameters: No such trait "
                 "CUSTOM_X"))

    def test_other_refusals_and_statuses_are_not(self):
        self.assertFalse(report.names_unknown_trait(
            400, "Invalid resource class in resources parameter"))
        self.assertFalse(report.names_unknown_trait(
            500, "No such trait(s): CUSTOM_X"))
        self.assertFalse(report.names_unknown_trait(400, None))
