package agentapi

// systemRoutes registers the routes of this group.
func (s *Server) systemRoutes() {}
