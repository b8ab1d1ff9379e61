// A replay's stepping: the table at every step of a finished game, worked out from its deal's
// layout and its stored actions (GET /api/v1/games/{id}/replay, docs/protocol.md §12.16), in
// the STATE's shape the table draws. Which card is face up is the cover map's (rules.js); the
// score is the server's (each action's score_after; before the first, every game's starting
// score, rules.js). Nothing here asks the server anything.
import { coveredBy, POSITIONS, START_SCORE } from "./rules.js";

/**
 * The tables of a replay: element 0 is the deal, element i the table after actions[i − 1].
 * Each is {game_id, seq (the step), rules, status, tableau (card | "down" | null), waste,
 * stock_count, score (the starting score before the first action, as at the table), moves, undos, can_undo: false}: the table
 * animates one step to the next as it does a game's moves.
 */
export function replayStates(replay) {
  const { layout, actions, game } = replay;
  const removed = new Array(POSITIONS).fill(false);
  const waste = [layout.waste];
  let drawn = 0;
  let moves = 0;
  let undos = 0;
  let score = START_SCORE;
  const states = [];
  const snapshot = (status) => ({
    game_id: game.id,
    seq: states.length,
    rules: game.rules,
    status,
    tableau: layout.tableau.map((card, pos) => {
      if (removed[pos]) return null;
      return coveredBy(pos).every((above) => removed[above]) ? card : "down";
    }),
    waste: waste[waste.length - 1],
    stock_count: layout.stock.length - drawn,
    score,
    moves,
    undos,
    can_undo: false,
  });
  states.push(snapshot("playing"));
  actions.forEach((action, i) => {
    if (action.action === "remove") {
      removed[action.pos] = true;
      waste.push(action.card);
      moves += 1;
    } else if (action.action === "draw") {
      drawn += 1;
      waste.push(action.card);
      moves += 1;
    } else {
      waste.pop();
      if (action.pos === null) drawn -= 1;
      else removed[action.pos] = false;
      undos += 1;
    }
    score = action.score_after;
    states.push(snapshot(i === actions.length - 1 ? game.status : "playing"));
  });
  return states;
}

