package controller

import "github.com/mosaic-agents/mosaic/queue"

// offerLaterLocked offers k the receipt of an item's later revision, or
// holds it while the item's admission reply is not queued for k yet:
// another connection may change a queued item in that window (its cancel
// or edit once it took control, its force stop's draft), and a client
// takes the first receipt naming its request as the reply, so the
// changed one would answer the prompt and the queued one arrive after it
// as news. Callers hold mu.
func (c *Controller) offerLaterLocked(k *conn, it *queue.Item) {
	if c.q.unanswered[it.ID] {
		c.q.later[it.ID] = append(c.q.later[it.ID], itemReceipt(it))
		return
	}
	c.offerLocked(k, itemReceipt(it))
}

// answeredLocked ends an item's wait for its admission reply, now queued
// for k: the receipts held meanwhile follow it, in their order. Callers
// hold mu.
func (c *Controller) answeredLocked(k *conn, id string) {
	delete(c.q.unanswered, id)
	for _, rc := range c.q.later[id] {
		c.offerLocked(k, rc)
	}
	delete(c.q.later, id)
}
