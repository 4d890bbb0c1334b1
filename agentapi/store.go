package agentapi

// storeRoutes registers the routes of this group.
func (s *Server) storeRoutes() {}
