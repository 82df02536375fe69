"""Sizes a host can take without breaking a free group
(nova.pci.free_groups)."""

from nova.pci import free_groups
from nova import test

# An HGX-like board: pairs {1,3} {2,4} {5,7} {6,8}, quads 1-4 and 5-8.
GPUS = [frozenset({str(n)}) for n in range(1, 9)]
PAIRS = [frozenset(pair) for pair in ('13', '24', '57', '68')]
QUADS = [frozenset('1234'), frozenset('5678')]
BOARD = [frozenset('12345678')]
GROUPS = GPUS + PAIRS + QUADS + BOARD


class TestFittingSizes(test.TestCase):

    def test_free_board_fits_only_a_board(self):
        self.assertEqual({8}, free_groups.fitting_sizes(GROUPS, set()))

    def test_one_gpu_taken(self):
        # GPU 3 is alone in its pair, pair {2,4} in its quad, quad 5-8 on
        # the board: each size fits without breaking anything.
        self.assertEqual({1, 2, 4},
                         free_groups.fitting_sizes(GROUPS, {'1'}))

    def test_sizes_that_would_break_a_free_group_are_left_out(self):
        # Quad 1-4 taken: only the whole free quad 5-8 fits; one GPU or a
        # pair would break it.
        self.assertEqual({4}, free_groups.fitting_sizes(GROUPS, set('1234')))
        self.assertEqual(set(), free_groups.fitting_sizes(GROUPS,
                                                          set('12345678')))

    def test_ungrouped_devices_each_fit_one(self):
        self.assertEqual({1}, free_groups.fitting_sizes(GPUS[:3], {'2'}))
        self.assertEqual(set(), free_groups.fitting_sizes([], set()))
