// A race runs on the server's clock (its start, its end, the countdown): the page measures how
// far the server's clock is from its own with each ROOM object, and reads server time with it.

/** Server time now, from the offset measured with the ROOM object's `server_time`. */
export function serverNow(race) {
  return Date.now() + (race ? race.offset : 0);
}

/** Remember how far the server's clock is from ours (clock skew; latency is small). */
export function measureOffset(race, room) {
  if (room && room.server_time) race.offset = Date.parse(room.server_time) - Date.now();
}
