"""Cards: text form, deck order, ranks and suits (docs/rules.md §1, §3 deck order)."""

from __future__ import annotations

import pytest

from server.engine import FULL_DECK, Card, EngineError, InvalidCardError, Rank, Suit


def test_suits_are_clubs_diamonds_hearts_spades_in_that_order() -> None:
    assert [suit.value for suit in Suit] == ["C", "D", "H", "S"]
    assert list(Suit) == [Suit.CLUBS, Suit.DIAMONDS, Suit.HEARTS, Suit.SPADES]


def test_ranks_run_ace_1_to_king_13_with_one_letter_symbols() -> None:
    assert [rank.value for rank in Rank] == list(range(1, 14))
    assert "".join(rank.symbol for rank in Rank) == "A23456789TJQK"
    assert Rank.ACE.symbol == "A" and Rank.TEN.symbol == "T" and Rank.KING.symbol == "K"


@pytest.mark.parametrize("card", FULL_DECK, ids=str)
def test_every_card_round_trips_through_its_text(card: Card) -> None:
    assert Card.parse(str(card)) == card
    assert Card.parse(str(card).lower()) == card
    assert len(str(card)) == 2


def test_ten_is_written_t_and_accepts_10_as_input() -> None:
    assert str(Card(Rank.TEN, Suit.HEARTS)) == "TH"
    assert Card.parse("10H") == Card(Rank.TEN, Suit.HEARTS)
    assert Card.parse("10s") == Card(Rank.TEN, Suit.SPADES)
    assert Card.parse("th") == Card(Rank.TEN, Suit.HEARTS)


def test_parse_is_case_insensitive() -> None:
    assert Card.parse("aS") == Card.parse("As") == Card.parse("as") == Card(Rank.ACE, Suit.SPADES)
    assert Card.parse("qd") == Card(Rank.QUEEN, Suit.DIAMONDS)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "A",
        "H",
        "1H",
        "11H",
        "0H",
        "ZH",
        "AX",
        "HA",
        "AHH",
        " AH",
        "AH ",
        "A H",
        "10",
        "T",
        "♥A",
        "A♥",
        "AH\n",
        "KDQ",
        "01H",
        "100H",
    ],
)
def test_parse_rejects_anything_else_naming_the_text(text: str) -> None:
    with pytest.raises(InvalidCardError) as raised:
        Card.parse(text)
    assert repr(text) in str(raised.value)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidCardError):
        Card.parse(5)  # type: ignore[arg-type]


def test_card_errors_are_engine_errors_and_value_errors() -> None:
    assert issubclass(InvalidCardError, EngineError)
    assert issubclass(EngineError, ValueError)


def test_full_deck_is_suit_major_clubs_first_each_ace_to_king() -> None:
    assert len(FULL_DECK) == 52 and len(set(FULL_DECK)) == 52
    assert " ".join(map(str, FULL_DECK[:13])) == "AC 2C 3C 4C 5C 6C 7C 8C 9C TC JC QC KC"
    assert str(FULL_DECK[13]) == "AD" and str(FULL_DECK[26]) == "AH" and str(FULL_DECK[39]) == "AS"
    assert str(FULL_DECK[0]) == "AC" and str(FULL_DECK[51]) == "KS"


@pytest.mark.parametrize("index", range(52))
def test_index_and_from_index_are_inverse(index: int) -> None:
    card = Card.from_index(index)
    assert card.index == index
    assert FULL_DECK[index] == card
    assert index == 13 * "CDHS".index(card.suit.value) + card.rank.value - 1


@pytest.mark.parametrize("index", [-1, 52, 100, True, 1.0, "3"])
def test_from_index_rejects_out_of_range_or_non_int(index: object) -> None:
    with pytest.raises(InvalidCardError):
        Card.from_index(index)  # type: ignore[arg-type]


def test_cards_are_immutable_and_hashable_values() -> None:
    card = Card.parse("QS")
    assert card == Card(Rank.QUEEN, Suit.SPADES)
    assert hash(card) == hash(Card(Rank.QUEEN, Suit.SPADES))
    with pytest.raises(AttributeError):
        card.rank = Rank.KING  # type: ignore[misc]


def test_cards_have_no_implicit_order() -> None:
    with pytest.raises(TypeError):
        _ = Card.parse("AS") < Card.parse("KS")  # type: ignore[operator]


def test_card_construction_rejects_non_enum_fields() -> None:
    with pytest.raises(InvalidCardError):
        Card(1, "H")  # type: ignore[arg-type]
